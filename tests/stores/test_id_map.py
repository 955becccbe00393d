"""IdMap: dense ids per node type for int and str keys, exact, atomic and persistent."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import warm_launcher

from gnnstore.common.errors import InvalidRequestError, NotFoundError, PreconditionError
from gnnstore.stores.id_map import IdMap


@pytest.fixture
def id_map(tmp_path: Path):
    with IdMap(tmp_path / "idmap") as m:
        yield m


def state(m: IdMap) -> dict:
    return {t: m.to_keys(t, list(range(m.num_nodes(t)))) for t in m.node_types()}


def test_new_keys_get_dense_ids_in_first_seen_order(id_map: IdMap) -> None:
    assert id_map.map_keys("user", [30, "a", 30, 10]).tolist() == [0, 1, 0, 2]
    assert id_map.map_keys("user", ["b", 10, "a"]).tolist() == [3, 2, 1]
    assert id_map.num_nodes("user") == 4
    assert id_map.to_keys("user", torch.tensor([3, 0, 1])) == ["b", 30, "a"]


def test_int_and_str_keys_are_distinct(id_map: IdMap) -> None:
    ids = id_map.map_keys("user", [5, "5", np.int64(5), -5])
    assert ids.tolist() == [0, 1, 0, 2]
    keys = id_map.to_keys("user", ids)
    assert keys == [5, "5", 5, -5] and [type(k) for k in keys] == [int, str, int, int]


@pytest.mark.parametrize("keys", [
    torch.tensor([7, 3, 7, 9], dtype=torch.int32), np.array([7, 3, 7, 9], dtype=np.uint16),
    [7, 3, 7, 9],
], ids=["int32-tensor", "uint16-array", "list"])
def test_vectorised_int_keys(id_map: IdMap, keys) -> None:
    assert id_map.map_keys(None, keys).tolist() == [0, 1, 0, 2]
    assert id_map.to_ids(None, keys).tolist() == [0, 1, 0, 2]
    assert id_map.node_types() == [None]


def test_node_types_are_separate_and_none_is_not_the_string(id_map: IdMap) -> None:
    id_map.map_keys(None, [1, 2])
    id_map.map_keys("None", [2])
    assert id_map.to_ids("None", [2]).tolist() == [0]
    assert id_map.to_ids(None, [2]).tolist() == [1]
    assert id_map.node_types() == [None, "None"]


def test_identity_fast_path_stays_exact(id_map: IdMap) -> None:
    id_map.identity("paper", 1000)
    assert id_map.num_nodes("paper") == 1000
    assert id_map.map_keys("paper", [999, 1000, -1, "x", 0]).tolist() == [999, 1000, 1001, 1002, 0]
    assert id_map.to_keys("paper", [0, 999, 1000, 1001, 1002]) == [0, 999, 1000, -1, "x"]
    with pytest.raises(InvalidRequestError, match="beyond an identity prefix"):
        id_map.identity("paper", 2000)
    assert id_map.num_nodes("paper") == 1003


def test_unknown_keys_name_type_and_first_missing(id_map: IdMap) -> None:
    id_map.map_keys("user", ["a", "b"])
    before = state(id_map)
    with pytest.raises(NotFoundError, match=r"'user' has no key\(s\) 'zz', 42 \(2 unknown of 3"):
        id_map.to_ids("user", ["zz", "a", 42])
    with pytest.raises(NotFoundError, match=r"no node type 'item' \(has: \['user'\]\)"):
        id_map.to_ids("item", ["a"])
    assert state(id_map) == before


@pytest.mark.parametrize("keys", [
    ["zz", "a", 42, "5", 5, 1000, "a"], np.array(["zz", "a", 42, "5", 5, 1000, "a"], dtype=object),
], ids=["list", "object-array"])
def test_lookup_gives_minus_one_for_unknown_keys_and_writes_nothing(id_map: IdMap, keys) -> None:
    id_map.identity("user", 3)
    id_map.map_keys("user", ["a", 5])
    before = state(id_map)
    assert id_map.lookup("user", keys).tolist() == [-1, 3, -1, -1, 4, -1, 3]
    assert state(id_map) == before


@pytest.mark.parametrize("keys", [
    torch.tensor([4, -1, 2, 9, 4], dtype=torch.int32), np.array([4, -1, 2, 9, 4], dtype=np.int64),
    [4, -1, 2, 9, 4],
], ids=["int32-tensor", "int64-array", "list"])
def test_lookup_vectorised_int_keys(id_map: IdMap, keys) -> None:
    id_map.identity(None, 3)
    id_map.map_keys(None, [9, 4])
    ids = id_map.lookup(None, keys)
    assert ids.dtype == np.int64 and ids.tolist() == [4, -1, 2, 3, 4]


def test_lookup_of_an_unknown_type_or_no_keys(id_map: IdMap) -> None:
    id_map.map_keys("user", ["a"])
    ids = id_map.lookup("item", ["a", 0])
    assert ids.dtype == np.int64 and ids.tolist() == [-1, -1]
    assert id_map.lookup(None, []).tolist() == [] and id_map.lookup("user", []).tolist() == []
    assert id_map.node_types() == ["user"]


def test_lookup_agrees_with_map_keys(id_map: IdMap) -> None:
    id_map.map_keys("user", ["a", "b", 3])
    keys = ["c", 3, "a", 7, "d"]
    known = id_map.lookup("user", keys)
    new = known < 0
    expected = known.copy()
    expected[new] = np.arange(id_map.num_nodes("user"), id_map.num_nodes("user") + int(new.sum()))
    assert np.array_equal(id_map.map_keys("user", keys), expected)
    assert np.array_equal(id_map.lookup("user", keys), expected)


@pytest.mark.parametrize("keys, fragment", [
    ({"a": 0}, "got a dict"), ({"a", "b"}, "got a set"), (frozenset({1}), "got a frozenset"),
    ({"a": 0}.keys(), "got a dict_keys"), ([1.5], "key #0 is 1.5 of type float"),
], ids=["dict", "set", "frozenset", "dict-keys", "float"])
@pytest.mark.parametrize("method", ["to_ids", "lookup", "map_keys"])
def test_unordered_or_bad_keys_are_refused(id_map: IdMap, method, keys, fragment) -> None:
    id_map.map_keys("user", ["a", 1])
    before = state(id_map)
    with pytest.raises(InvalidRequestError, match=fragment):
        getattr(id_map, method)("user", keys)
    assert state(id_map) == before


def test_read_only_lookup(tmp_path: Path) -> None:
    with IdMap(tmp_path / "idmap") as m:
        m.map_keys("user", ["a", "b"])
    with IdMap(tmp_path / "idmap", read_only=True) as m:
        assert m.lookup("user", ["b", "x"]).tolist() == [1, -1]


def test_ids_out_of_range(id_map: IdMap) -> None:
    id_map.map_keys("user", ["a", "b"])
    with pytest.raises(InvalidRequestError, match=r"'user': id 2 is out of range \(valid ids: 0\.\.1\)"):
        id_map.to_keys("user", [0, 2])
    with pytest.raises(InvalidRequestError, match="id -1 is out of range"):
        id_map.to_keys("user", torch.tensor([-1]))


@pytest.mark.parametrize("keys, fragment", [
    (["a", 1.5], "key #1 is 1.5 of type float"),
    ([True], "key #0 is True of type bool"),
    ([1 << 70], "does not fit in int64"),
    ("abc", "got str"),
    (np.zeros((2, 2), dtype=np.int64), "shape \\[2, 2\\]"),
], ids=["float", "bool", "overflow", "bare-str", "2-d"])
def test_bad_keys_change_nothing(id_map: IdMap, keys, fragment) -> None:
    id_map.map_keys("user", ["a", 7])
    before = state(id_map)
    with pytest.raises(InvalidRequestError, match=fragment):
        id_map.map_keys("user", keys)
    assert state(id_map) == before


def test_reopen_in_a_new_process_gives_the_same_map(tmp_path: Path) -> None:
    path = tmp_path / "idmap"
    with IdMap(path) as m:
        m.map_keys("user", ["a", 5, "5"])
        m.map_keys(None, np.arange(100, 0, -1))
        m.identity("paper", 3)
    code = ("import sys; from gnnstore.stores.id_map import IdMap\n"
            "m = IdMap(sys.argv[1], read_only=True)\n"
            "print(repr([(t, m.to_keys(t, list(range(m.num_nodes(t))))) for t in m.node_types()]))\n"
            "print(m.to_ids('user', ['5', 5]).tolist())")
    out = warm_launcher.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True,
                         timeout=60, check=True).stdout.splitlines()
    assert eval(out[0]) == [("user", ["a", 5, "5"]), (None, list(range(100, 0, -1))),
                            ("paper", [0, 1, 2])]
    assert out[1] == "[2, 1]"


def test_read_only_refuses_writes(tmp_path: Path) -> None:
    with IdMap(tmp_path / "idmap") as m:
        m.map_keys("user", ["a"])
    with IdMap(tmp_path / "idmap", read_only=True) as m:
        with pytest.raises(PreconditionError, match="read-only"):
            m.map_keys("user", ["b"])
        assert m.to_ids("user", ["a"]).tolist() == [0]


def test_a_follower_sees_the_writers_new_keys_and_types_after_catching_up(id_map: IdMap) -> None:
    id_map.map_keys("user", ["a", "b"])
    with IdMap(id_map.path, follow=True) as follower:
        id_map.map_keys("user", ["c"])
        id_map.map_keys("item", [7])
        assert state(follower) == {"user": ["a", "b"]}
        follower.catch_up()
        assert state(follower) == {"user": ["a", "b", "c"], "item": [7]}
        with pytest.raises(PreconditionError, match="read-only"):
            follower.map_keys("user", ["d"])
