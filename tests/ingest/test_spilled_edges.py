"""The attach's edge ends go through temporary files, page by page, and come back whole."""
from __future__ import annotations

import numpy as np
import torch

from gnnstore.ingest.neo4j_attach import _SpilledEdges


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
