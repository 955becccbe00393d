"""Behaviour every gnnstore FeatureStore shares; subclasses provide ``make_store``.

Ported from PyG's upstream ``test/data/test_feature_store.py`` plus gnnstore's index, dtype
and bad-input rules. The class name does not start with ``Test``, so it is not collected itself.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch
from torch_geometric.data import FeatureStore, TensorAttr
from torch_geometric.data.feature_store import AttrView, _FieldStatus

from gnnstore.common.errors import InvalidRequestError, NotFoundError

DTYPES = [
    torch.float32, torch.float64, torch.float16, torch.bfloat16,
    torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool,
]
INDEX_FORMS = {
    "none": lambda n: (None, torch.arange(n)),
    "slice": lambda n: (slice(1, n - 1), torch.arange(1, n - 1)),
    "int": lambda n: (3, torch.tensor(3)),
    "empty": lambda n: (torch.tensor([], dtype=torch.long), torch.tensor([], dtype=torch.long)),
    "int32": lambda n: (torch.tensor([4, 0, 2], dtype=torch.int32), torch.tensor([4, 0, 2])),
    "int64": lambda n: (torch.tensor([1, 5, 3]), torch.tensor([1, 5, 3])),
    "duplicates": lambda n: (torch.tensor([2, 2, 0, 2]), torch.tensor([2, 2, 0, 2])),
    # PyG 2.8.1's is_fully_specified() compares the index with `!=`, which a numpy array of
    # more than one element cannot answer, so the public API only takes 1-element arrays.
    "numpy": lambda n: (np.array([5]), torch.tensor([5])),
}


def sample_tensor(dtype: torch.dtype, shape: tuple[int, ...]) -> torch.Tensor:
    """Deterministic values of ``dtype`` whose rows differ from each other."""
    gen = torch.Generator().manual_seed(0)
    if dtype == torch.bool:
        return torch.rand(shape, generator=gen) > 0.5
    if dtype.is_floating_point:
        return (torch.randn(shape, generator=gen) * 100).to(dtype)
    return torch.randint(0, 100, shape, generator=gen).to(dtype)


def snapshot(store: FeatureStore) -> dict:
    """Every stored tensor, keyed by (group_name, attr_name), to compare before and after."""
    return {
        (a.group_name, a.attr_name): store.get_tensor(a.group_name, a.attr_name, None)
        for a in store.get_all_tensor_attrs()
    }


def assert_unchanged(store: FeatureStore, before: dict) -> None:
    after = snapshot(store)
    assert after.keys() == before.keys()
    for key, tensor in before.items():
        assert after[key].dtype == tensor.dtype and torch.equal(after[key], tensor), key


@dataclass
class TensorAttrNoGroupName(TensorAttr):
    """Upstream's override: only attr_name and index, in that order."""

    def __init__(self, attr_name=_FieldStatus.UNSET, index=_FieldStatus.UNSET):
        super().__init__(None, attr_name, index)


class FeatureStoreContract:
    """Every writable FeatureStore gnnstore ships passes these."""

    def make_store(self, tmp_path: Path) -> FeatureStore:
        """An empty, writable store living under ``tmp_path``."""
        raise NotImplementedError

    @pytest.fixture
    def store(self, tmp_path: Path):
        store = self.make_store(tmp_path)
        yield store
        close = getattr(store, "close", None)
        if close is not None:
            close()

    # ---- upstream test_feature_store ----------------------------------------------------

    def test_upstream_feature_store(self, store: FeatureStore) -> None:
        tensor = torch.Tensor([[0, 0, 0], [1, 1, 1], [2, 2, 2]])
        group_name, attr_name = "A", "feat"
        index = torch.tensor([0, 1, 2])
        attr = TensorAttr(group_name, attr_name, index)

        store.put_tensor(tensor, attr)
        assert torch.equal(store.get_tensor(attr), tensor)
        assert torch.equal(
            store.get_tensor(group_name, attr_name, index=torch.tensor([0, 2])),
            tensor[torch.tensor([0, 2])],
        )
        assert store.update_tensor(tensor + 1, group_name, attr_name, None)
        assert torch.equal(store.get_tensor(attr), tensor + 1)
        store.remove_tensor(group_name, attr_name, None)
        with pytest.raises(KeyError):
            store.get_tensor(attr)

        view = store.view(group_name=group_name)
        view.attr_name = attr_name
        view["index"] = index
        assert view == AttrView(store, TensorAttr(group_name, attr_name, index))
        assert (view == 0) is False

        store[group_name, attr_name, index] = tensor
        assert torch.equal(store[group_name, attr_name, index], tensor)
        assert torch.equal(store[group_name, attr_name, None], tensor)
        assert torch.equal(store[group_name, attr_name, :], tensor)
        assert torch.equal(store[group_name][attr_name][:], tensor)
        assert torch.equal(store[group_name].feat[:], tensor)
        assert torch.equal(store.view().A.feat[:], tensor)
        with pytest.raises(AttributeError):
            store.view(group_name=group_name, index=None).feat.A
        assert store[group_name] == store.view(TensorAttr(group_name=group_name))

        # Upstream also writes through a partial key (`store[group_name] = tensor`); PyG 2.8.1's
        # __setitem__ asserts a fully specified key, so that form is left out.
        del store[group_name, attr_name, index]
        with pytest.raises(KeyError):
            store[group_name, attr_name, index]
        del store[group_name]
        with pytest.raises(KeyError):
            store[group_name]()

    def test_upstream_feature_store_override(self, store: FeatureStore) -> None:
        store._tensor_attr_cls = TensorAttrNoGroupName
        tensor = torch.Tensor([[0, 0, 0], [1, 1, 1], [2, 2, 2]])
        index = torch.tensor([0, 1, 2])
        store["feat", index] = tensor
        assert isinstance(store["feat"], AttrView)
        assert torch.equal(store["feat", index], tensor)
        assert torch.equal(store["feat"][index], tensor)
        assert torch.equal(store["feat"][:], tensor)
        assert torch.equal(store["feat", :], tensor)

    # ---- index forms x dtypes -----------------------------------------------------------

    @pytest.mark.parametrize("dtype", DTYPES, ids=str)
    @pytest.mark.parametrize("form", list(INDEX_FORMS))
    def test_index_forms_and_dtypes(self, store: FeatureStore, form: str, dtype: torch.dtype) -> None:
        x = sample_tensor(dtype, (6, 2, 3))
        store.put_tensor(x, group_name="paper", attr_name="x", index=None)
        index, expected = INDEX_FORMS[form](6)
        out = store.get_tensor("paper", "x", index)
        assert out.dtype == dtype
        assert out.shape == x[expected].shape
        assert torch.equal(out, x[expected])

    def test_multi_get_keeps_attr_order(self, store: FeatureStore) -> None:
        x, y = sample_tensor(torch.float32, (5, 4)), sample_tensor(torch.int64, (3,))
        store.put_tensor(x, group_name="paper", attr_name="x", index=None)
        store.put_tensor(y, group_name="author", attr_name="y", index=None)
        out = store.multi_get_tensor([
            TensorAttr("author", "y", torch.tensor([2, 0])),
            TensorAttr("paper", "x", torch.tensor([4, 4, 1], dtype=torch.int32)),
        ])
        assert torch.equal(out[0], y[[2, 0]])
        assert torch.equal(out[1], x[[4, 4, 1]])

    def test_homogeneous_none_group_is_not_the_string_none(self, store: FeatureStore) -> None:
        store.put_tensor(torch.zeros(2, 1), group_name=None, attr_name="x", index=None)
        store.put_tensor(torch.ones(3, 1), group_name="None", attr_name="x", index=None)
        groups = sorted(repr(a.group_name) for a in store.get_all_tensor_attrs())
        assert groups == ["'None'", "None"]
        assert store.get_tensor(None, "x", None).shape == (2, 1)
        assert store.get_tensor("None", "x", None).shape == (3, 1)

    def test_attr_name_none_is_a_name_as_in_pyg(self, store: FeatureStore) -> None:
        x, named = torch.randn(5, 3), torch.randn(5, 2)
        store["A", None, None] = x  # PyG's reference store takes it, and reads it with store['A']()
        store["A", "named", None] = named
        assert torch.equal(store["A"](), x)
        assert torch.equal(store.get_tensor("A", None, torch.tensor([4, 0])), x[[4, 0]])
        assert torch.equal(store["A", "named", None], named)
        assert sorted(repr(a.attr_name) for a in store.get_all_tensor_attrs()) == ["'named'", "None"]
        assert store.get_tensor_size("A", None) == (5, 3)
        assert store.remove_tensor("A", None, None)
        assert [a.attr_name for a in store.get_all_tensor_attrs()] == ["named"]

    def test_get_all_tensor_attrs_returns_fresh_objects(self, store: FeatureStore) -> None:
        store.put_tensor(torch.zeros(4, 2), group_name="paper", attr_name="x", index=None)
        first = store.get_all_tensor_attrs()
        assert [(a.group_name, a.attr_name, a.index) for a in first] == [("paper", "x", None)]
        first[0].index = torch.tensor([1])
        second = store.get_all_tensor_attrs()
        assert second[0] is not first[0] and second[0].index is None
        assert store.get_tensor_size(group_name="paper", attr_name="x") == (4, 2)

    def test_put_with_index_updates_and_appends_rows(self, store: FeatureStore) -> None:
        x = sample_tensor(torch.float32, (4, 2))
        store.put_tensor(x, group_name="paper", attr_name="x", index=None)
        store.put_tensor(torch.full((2, 2), 7.0), group_name="paper", attr_name="x",
                         index=torch.tensor([3, 1]))
        store.put_tensor(torch.full((2, 2), 9.0), group_name="paper", attr_name="x",
                         index=torch.tensor([5, 4]))
        expected = torch.cat([x, torch.full((2, 2), 9.0)])
        expected[[3, 1]] = 7.0
        assert torch.equal(store.get_tensor("paper", "x", None), expected)
        assert store.get_tensor_size(group_name="paper", attr_name="x") == (6, 2)

    def test_put_whole_replaces_and_remove_forgets(self, store: FeatureStore) -> None:
        store.put_tensor(torch.zeros(5, 3), group_name="paper", attr_name="x", index=None)
        store.put_tensor(torch.ones(2, 4, dtype=torch.int8), group_name="paper", attr_name="x",
                         index=None)
        assert torch.equal(store.get_tensor("paper", "x", None), torch.ones(2, 4, dtype=torch.int8))
        assert store.remove_tensor(group_name="paper", attr_name="x", index=None)
        assert store.get_all_tensor_attrs() == []
        assert store.get_tensor_size(group_name="paper", attr_name="x") is None

    # ---- bad input: the right error, a message fragment, nothing lost ------------------

    @pytest.fixture
    def filled(self, store: FeatureStore) -> tuple[FeatureStore, dict]:
        store.put_tensor(sample_tensor(torch.float32, (5, 3)), group_name="paper", attr_name="x",
                         index=None)
        store.put_tensor(sample_tensor(torch.int64, (4,)), group_name=None, attr_name="y", index=None)
        return store, snapshot(store)

    def test_unknown_attr_names_group_attr_and_stored(self, filled) -> None:
        store, before = filled
        with pytest.raises(NotFoundError, match=r"'z'.*'paper'.*stored: .*'x'"):
            store.get_tensor("paper", "z", None)
        with pytest.raises(KeyError, match="author"):
            store.get_tensor("author", "x", torch.tensor([0]))
        assert_unchanged(store, before)

    @pytest.mark.parametrize("index", [torch.tensor([0, 5]), torch.tensor([-1]), 9, np.array([7])],
                             ids=["past-end", "negative", "int", "numpy"])
    def test_ids_out_of_range(self, filled, index) -> None:
        store, before = filled
        with pytest.raises(InvalidRequestError, match=r"'paper'.*'x'.*out of range.*0\.\.4"):
            store.get_tensor("paper", "x", index)
        assert_unchanged(store, before)

    def test_put_out_of_range_leaves_a_gap_is_refused(self, filled) -> None:
        store, before = filled
        with pytest.raises(InvalidRequestError, match="id 7 leaves id 5 unset"):
            store.put_tensor(torch.zeros(1, 3), group_name="paper", attr_name="x",
                             index=torch.tensor([7]))
        assert_unchanged(store, before)

    @pytest.mark.parametrize("bad, fragment", [
        (torch.zeros(2, 3, dtype=torch.float64), "holds float32, got float64"),
        (torch.zeros(2, 4), r"rows of shape \[3\], got a tensor of shape \[2, 4\]"),
        (torch.zeros(3, 3), "index selects 2 rows but the tensor has 3"),
    ], ids=["dtype", "row-shape", "row-count"])
    def test_put_rows_with_wrong_format(self, filled, bad, fragment) -> None:
        store, before = filled
        with pytest.raises(InvalidRequestError, match=fragment):
            store.put_tensor(bad, group_name="paper", attr_name="x", index=torch.tensor([0, 1]))
        assert_unchanged(store, before)

    def test_put_ragged_rows(self, filled) -> None:
        store, before = filled
        with pytest.raises(InvalidRequestError, match="fixed-width rows"):
            store.put_tensor([[1.0, 2.0], [3.0]], group_name="paper", attr_name="x", index=None)
        assert_unchanged(store, before)

    @pytest.mark.parametrize("index", [torch.tensor([0.5]), torch.tensor([[0, 1]]), "0"],
                             ids=["float", "2-d", "str"])
    def test_index_of_wrong_type(self, filled, index) -> None:
        store, before = filled
        with pytest.raises(InvalidRequestError, match="index must be"):
            store.get_tensor("paper", "x", index)
        assert_unchanged(store, before)

    def test_empty_string_group_is_refused(self, filled) -> None:
        store, before = filled
        with pytest.raises(InvalidRequestError, match="use|None for a homogeneous"):
            store.put_tensor(torch.zeros(1, 3), group_name="", attr_name="x", index=None)
        assert_unchanged(store, before)
