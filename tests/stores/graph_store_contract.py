"""Behaviour every gnnstore graph store shares; subclasses provide ``make_store``.

Ported from PyG's upstream ``test/data/test_graph_store.py`` (``test_graph_store``,
``test_graph_store_conversion``, with CSR/CSC built by plain torch instead of torch-sparse)
plus gnnstore's ``BaseGraphStore`` duties: sizes, edge-id order, ``iter_edge_index``,
``version()`` and bad input that leaves the store unchanged. Not collected itself.

Usage::

    class TestMyGraphStore(GraphStoreContract):
        def make_store(self, tmp_path):
            return MyGraphStore(...)   # empty and writable
"""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import Tensor
from torch_geometric.data import EdgeAttr
from torch_geometric.data.graph_store import EdgeLayout

from gnnstore.common.errors import InvalidRequestError, NotFoundError
from gnnstore.stores.base import BaseGraphStore

HETERO = {  # 3 node types, 5 edge types: two relations paper->paper, 'writes' twice
    ("author", "writes", "paper"): (6, 8),
    ("paper", "cites", "paper"): (8, 8),
    ("paper", "extends", "paper"): (8, 8),
    ("paper", "about", "topic"): (8, 3),
    ("topic", "writes", "author"): (3, 6),
}


def random_coo(num_src: int, num_dst: int, num_edges: int, seed: int = 0) -> tuple[Tensor, Tensor]:
    """A random COO edge list with repeated edges and self-loops allowed."""
    gen = torch.Generator().manual_seed(seed)
    return (torch.randint(0, num_src, (num_edges,), generator=gen),
            torch.randint(0, num_dst, (num_edges,), generator=gen))


def to_csr(row: Tensor, col: Tensor, num_src: int) -> tuple[Tensor, Tensor]:
    """(rowptr, col) with a stable sort by source, as torch-sparse builds it."""
    perm = torch.sort(row * (col.max() + 1 if col.numel() else 1) + col, stable=True).indices
    rowptr = torch.zeros(num_src + 1, dtype=torch.long)
    rowptr[1:] = torch.cumsum(torch.bincount(row, minlength=num_src), 0)
    return rowptr, col[perm]


def to_csc(row: Tensor, col: Tensor, num_dst: int) -> tuple[Tensor, Tensor]:
    """(row, colptr) with a sort by destination, as torch-sparse builds it."""
    colptr, sorted_row = to_csr(col, row, num_dst)
    return sorted_row, colptr


def assert_pair_equal(expected: tuple[Tensor, Tensor], actual: tuple[Tensor, Tensor]) -> None:
    assert len(actual) == 2
    for e, a in zip(expected, actual):
        assert a.dtype == torch.long
        assert torch.equal(e, a)


def stored_edges(store: BaseGraphStore) -> dict:
    """Every stored (edge_type, layout) with its tensors and attrs, to compare before and after."""
    return {
        (a.edge_type, a.layout.value): (tuple(t.clone() for t in store.get_edge_index(a)),
                                        a.size, a.is_sorted)
        for a in store.get_all_edge_attrs()
    }


def assert_unchanged(store: BaseGraphStore, before: dict) -> None:
    after = stored_edges(store)
    assert after.keys() == before.keys()
    for key, (tensors, size, is_sorted) in before.items():
        got_tensors, got_size, got_sorted = after[key]
        assert tuple(got_size) == tuple(size) and got_sorted == is_sorted, key
        assert all(torch.equal(a, b) for a, b in zip(tensors, got_tensors)), key


class GraphStoreContract:
    """Every writable BaseGraphStore gnnstore ships passes these."""

    def make_store(self, tmp_path: Path) -> BaseGraphStore:
        """An empty, writable store living under ``tmp_path`` (or on a clean server)."""
        raise NotImplementedError

    @pytest.fixture
    def store(self, tmp_path: Path):
        store = self.make_store(tmp_path)
        yield store
        store.close()

    # ---- upstream test_graph_store / test_graph_store_conversion -----------------------

    def test_upstream_graph_store(self, store: BaseGraphStore) -> None:
        coo = torch.tensor([0, 1]), torch.tensor([1, 2])
        csr = torch.tensor([0, 1, 2]), torch.tensor([1, 2])
        csc = torch.tensor([0, 1]), torch.tensor([0, 0, 1, 2])
        store["edge_type", "coo"] = coo
        store["edge_type", "csr"] = csr
        store["edge_type", "csc"] = csc
        assert_pair_equal(coo, store["edge_type", "coo"])
        assert_pair_equal(csr, store["edge_type", "csr"])
        assert_pair_equal(csc, store["edge_type", "csc"])
        assert len(store.get_all_edge_attrs()) == 3
        del store["edge_type", "coo"]
        with pytest.raises(KeyError):
            store["edge_type", "coo"]
        with pytest.raises(KeyError):
            store["edge_type_2", "coo"]
        assert len(store.get_all_edge_attrs()) == 2

    def test_upstream_graph_store_conversion(self, store: BaseGraphStore) -> None:
        coo = row, col = random_coo(100, 100, 300)
        csr, csc = to_csr(row, col, 100), to_csc(row, col, 100)
        store.put_edge_index(coo, ("v", "1", "v"), "coo", size=(100, 100))
        store.put_edge_index(csr, ("v", "2", "v"), "csr", size=(100, 100))
        store.put_edge_index(csc, ("v", "3", "v"), "csc", size=(100, 100))

        row_dict, col_dict, perm_dict = store.coo()
        assert len(row_dict) == len(col_dict) == len(perm_dict) == 3
        for r, c, perm in zip(row_dict.values(), col_dict.values(), perm_dict.values()):
            assert torch.equal(r.sort()[0], coo[0].sort()[0])
            assert torch.equal(c.sort()[0], coo[1].sort()[0])
            assert perm is None

        row_dict, col_dict, perm_dict = store.csr()
        assert len(row_dict) == len(col_dict) == len(perm_dict) == 3
        for r, c in zip(row_dict.values(), col_dict.values()):
            assert torch.equal(r, csr[0])
            assert torch.equal(c.sort()[0], csr[1].sort()[0])

        row_dict, col_dict, perm_dict = store.csc()
        assert len(row_dict) == len(col_dict) == len(perm_dict) == 3
        for r, c in zip(row_dict.values(), col_dict.values()):
            assert torch.equal(r.sort()[0], csc[0].sort()[0])
            assert torch.equal(c, csc[1])

        out = store.coo([("v", "1", "v")])
        assert torch.equal(list(out[0].values())[0], coo[0])
        assert torch.equal(list(out[1].values())[0], coo[1])

        key = EdgeAttr(edge_type=("v", "1", "v"), layout=EdgeLayout.CSR, is_sorted=False,
                       size=(100, 100))
        with pytest.raises(KeyError):
            store[key]
        out = store.csr([("v", "1", "v")], store=True)
        assert torch.equal(list(out[0].values())[0], csr[0])
        assert torch.equal(list(out[1].values())[0].sort()[0], csr[1].sort()[0])
        out = store[key]
        assert torch.equal(out[0], csr[0])
        assert torch.equal(out[1].sort()[0], csr[1].sort()[0])

    # ---- gnnstore's rules ---------------------------------------------------------------

    def test_hetero_round_trip_with_sizes(self, store: BaseGraphStore) -> None:
        edges = {et: random_coo(*size, 40, seed=i) for i, (et, size) in enumerate(HETERO.items())}
        for et, coo in edges.items():
            store.put_edge_index(coo, et, "coo", size=HETERO[et])
        attrs = {a.edge_type: a for a in store.get_all_edge_attrs()}
        assert attrs.keys() == HETERO.keys()
        for et, coo in edges.items():
            assert all(isinstance(part, str) for part in attrs[et].edge_type)
            assert tuple(attrs[et].size) == HETERO[et]
            assert attrs[et].layout == EdgeLayout.COO and attrs[et].is_sorted is False
            assert_pair_equal(coo, store.get_edge_index(et, "coo"))

    def test_homogeneous_edge_type_none(self, store: BaseGraphStore) -> None:
        coo = random_coo(10, 10, 30)
        store.put_edge_index(coo, None, "coo", size=(10, 10))
        (attr,) = store.get_all_edge_attrs()
        assert attr.edge_type is None and tuple(attr.size) == (10, 10)
        assert_pair_equal(coo, store.get_edge_index(None, "coo"))
        row, colptr, perm = store.csc()
        assert colptr.numel() == 11 and torch.equal(row, coo[0][perm])

    def test_size_defaults_to_max_id_plus_one(self, store: BaseGraphStore) -> None:
        store.put_edge_index((torch.tensor([0, 4]), torch.tensor([2, 1])), ("a", "r", "b"), "coo")
        (attr,) = store.get_all_edge_attrs()
        assert tuple(attr.size) == (5, 3)

    def test_sorted_coo_keeps_is_sorted(self, store: BaseGraphStore) -> None:
        row, col = random_coo(20, 20, 50)
        perm = torch.sort(col, stable=True).indices
        store.put_edge_index((row[perm], col[perm]), ("v", "r", "v"), "coo", is_sorted=True,
                             size=(20, 20))
        (attr,) = store.get_all_edge_attrs()
        assert attr.is_sorted is True
        assert_pair_equal((row[perm], col[perm]), store.get_edge_index(("v", "r", "v"), "coo"))

    @pytest.mark.parametrize("layout", ["coo", "csr", "csc"])
    def test_iter_edge_index_streams_in_edge_id_order(self, store: BaseGraphStore, layout: str) -> None:
        row, col = random_coo(30, 20, 257, seed=3)
        put = {"coo": (row, col), "csr": to_csr(row, col, 30), "csc": to_csc(row, col, 20)}[layout]
        store.put_edge_index(put, ("a", "r", "b"), layout, size=(30, 20))
        chunks = list(store.iter_edge_index(("a", "r", "b"), chunk_size=100))
        assert [c[0].numel() for c in chunks] == [100, 100, 57]
        r, c, e_id = (torch.cat(parts) for parts in zip(*chunks))
        assert torch.equal(e_id, torch.arange(257))
        if layout == "coo":
            expected = row, col
        elif layout == "csr":
            rowptr, csr_col = put
            expected = torch.repeat_interleave(torch.arange(30), rowptr.diff()), csr_col
        else:
            csc_row, colptr = put
            expected = csc_row, torch.repeat_interleave(torch.arange(20), colptr.diff())
        assert torch.equal(r, expected[0]) and torch.equal(c, expected[1])
        assert all(t.dtype == torch.long for chunk in chunks for t in chunk)

    def test_iter_edge_index_prefers_coo(self, store: BaseGraphStore) -> None:
        row, col = random_coo(10, 10, 20)
        store.put_edge_index(to_csc(row, col, 10), None, "csc", size=(10, 10))
        store.put_edge_index((row, col), None, "coo", size=(10, 10))
        r, c, _ = (torch.cat(parts) for parts in zip(*store.iter_edge_index(None, 7)))
        assert torch.equal(r, row) and torch.equal(c, col)

    def test_iter_edge_index_of_unknown_type(self, store: BaseGraphStore) -> None:
        with pytest.raises(NotFoundError, match="nope"):
            list(store.iter_edge_index(("a", "nope", "b"), 10))

    def test_put_replaces_and_version_changes(self, store: BaseGraphStore) -> None:
        versions = [store.version()]
        store.put_edge_index(random_coo(5, 5, 10), ("v", "r", "v"), "coo", size=(5, 5))
        versions.append(store.version())
        new = random_coo(7, 7, 4, seed=1)
        store.put_edge_index(new, ("v", "r", "v"), "coo", size=(7, 7))
        versions.append(store.version())
        assert_pair_equal(new, store.get_edge_index(("v", "r", "v"), "coo"))
        assert tuple(store.get_all_edge_attrs()[0].size) == (7, 7)
        assert store.remove_edge_index(("v", "r", "v"), "coo")
        versions.append(store.version())
        assert store.get_all_edge_attrs() == []
        assert len(set(versions)) == 4

    def test_empty_edge_list(self, store: BaseGraphStore) -> None:
        empty = torch.tensor([], dtype=torch.long)
        store.put_edge_index((empty, empty), ("a", "r", "b"), "coo", size=(3, 4))
        assert_pair_equal((empty, empty), store.get_edge_index(("a", "r", "b"), "coo"))
        assert list(store.iter_edge_index(("a", "r", "b"), 10)) == []

    # ---- bad input: the right error, a message fragment, nothing lost ------------------

    @pytest.fixture
    def filled(self, store: BaseGraphStore) -> tuple[BaseGraphStore, dict]:
        store.put_edge_index(random_coo(6, 8, 12), ("author", "writes", "paper"), "coo", size=(6, 8))
        store.put_edge_index(random_coo(4, 4, 5), None, "coo", size=(4, 4))
        return store, stored_edges(store)

    @pytest.mark.parametrize("edge_index, kwargs, fragment", [
        ((torch.tensor([0, 1]), torch.tensor([1])), {}, "row has 2 entries but col has 1"),
        (torch.zeros(3, 4, dtype=torch.long), {}, r"shape \[3, 4\]"),
        ((torch.tensor([0.0]), torch.tensor([1.0])), {}, "torch.float32"),
        ((torch.tensor([0, 9]), torch.tensor([1, 2])), {"size": (6, 8)}, "id 9 .*0..5"),
        ((torch.tensor([-1]), torch.tensor([1])), {}, "id -1"),
        ((torch.tensor([0, 1]), torch.tensor([3, 2])), {"is_sorted": True}, "not sorted"),
        ((torch.tensor([0, 1]), torch.tensor([3, 2])), {"size": (6,)}, "size"),
    ], ids=["ragged", "shape", "dtype", "beyond-size", "negative", "unsorted", "bad-size"])
    def test_bad_coo_changes_nothing(self, filled, edge_index, kwargs, fragment) -> None:
        store, before = filled
        with pytest.raises(InvalidRequestError, match=fragment):
            store.put_edge_index(edge_index, ("author", "writes", "paper"), "coo", **kwargs)
        assert_unchanged(store, before)

    @pytest.mark.parametrize("edge_index, layout, fragment", [
        ((torch.tensor([0, 2, 1]), torch.tensor([1, 2])), "csr", "rowptr"),
        ((torch.tensor([0, 1, 5]), torch.tensor([1, 2])), "csr", "rowptr"),
        ((torch.tensor([1, 2]), torch.tensor([0, 1])), "csc", "colptr"),
    ], ids=["csr-decreasing", "csr-last", "csc-short"])
    def test_bad_compressed_changes_nothing(self, filled, edge_index, layout, fragment) -> None:
        store, before = filled
        with pytest.raises(InvalidRequestError, match=fragment):
            store.put_edge_index(edge_index, ("author", "writes", "paper"), layout)
        assert_unchanged(store, before)

    @pytest.mark.parametrize("edge_type", [("a", "b"), ("a", "", "b"), "", 5],
                             ids=["pair", "empty-rel", "empty-str", "int"])
    def test_bad_edge_type_changes_nothing(self, filled, edge_type) -> None:
        store, before = filled
        with pytest.raises(InvalidRequestError, match="edge type"):
            store.put_edge_index((torch.tensor([0]), torch.tensor([1])), edge_type, "coo")
        assert_unchanged(store, before)

    def test_odd_type_names_are_data_not_cypher(self, store: BaseGraphStore) -> None:
        et = ("Pa`per } ) DETACH DELETE n //", "réf'ers\"to", "paper with spaces")
        coo = random_coo(3, 4, 6)
        store.put_edge_index(coo, et, "coo", size=(3, 4))
        assert store.get_all_edge_attrs()[0].edge_type == et
        assert_pair_equal(coo, store.get_edge_index(et, "coo"))
