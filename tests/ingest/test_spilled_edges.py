"""The attach's edge ends and property values go through temporary files, page by page, and come
back whole."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from gnnstore.common.errors import InvalidRequestError
from gnnstore.ingest.neo4j_attach import _SpilledColumn, _SpilledEdges


def test_pages_come_back_as_one_edge_index_in_their_order() -> None:
    spilled, rng = _SpilledEdges(), np.random.default_rng(0)
    pages = [rng.integers(0, 1000, size=(2, n)) for n in (5, 0, 70_000, 3)]
    for row, col in pages:
        spilled.append(row, col.astype(np.int32))  # get_indexer gives intp; any int is written as int64
    edge_index = spilled.edge_index()
    assert edge_index.dtype == torch.long
    assert torch.equal(edge_index, torch.from_numpy(np.concatenate(pages, axis=1)))


def test_no_edges_give_an_empty_edge_index() -> None:
    edge_index = _SpilledEdges().edge_index()
    assert edge_index.shape == (2, 0) and edge_index.dtype == torch.long


def test_property_pages_come_back_as_one_column_with_integers_as_floats_beside_floats() -> None:
    pages = [torch.arange(6).reshape(3, 2), torch.empty(0, 2, dtype=torch.long), torch.tensor([[0.5, 1.5]]),
             torch.arange(40_000).reshape(20_000, 2)]
    column = _SpilledColumn()
    for page in pages:
        column.append(page)
    joined = column.joined("p")
    assert joined.dtype == torch.float32 and torch.equal(joined, torch.cat(pages).float())
    integers, flags = _SpilledColumn(), _SpilledColumn()
    for i in range(3):
        integers.append(torch.arange(i, i + 4))
        flags.append(torch.tensor([i % 2 == 0]))
    numbers = integers.joined("q")
    assert numbers.dtype == torch.int64 and numbers.tolist() == [0, 1, 2, 3, 1, 2, 3, 4, 2, 3, 4, 5]
    assert flags.joined("f").tolist() == [True, False, True]
    assert _SpilledColumn().joined("none").numel() == 0


@pytest.mark.parametrize("pages, message", [
    ([torch.tensor([[1, 2]]), torch.tensor([[1, 2, 3]])], r"p: lists of \[2, 3\] values; every one needs one length"),
    ([torch.tensor([True]), torch.tensor([1])], "p: booleans beside numbers; use one kind"),
])
def test_pages_that_do_not_join_are_named(pages: list[torch.Tensor], message: str) -> None:
    column = _SpilledColumn()
    for page in pages:
        column.append(page)
    with pytest.raises(InvalidRequestError, match=message):
        column.joined("p")
