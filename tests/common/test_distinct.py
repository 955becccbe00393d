"""``distinct_in_order``: the distinct ids of a batch in order of first appearance."""
from __future__ import annotations

import numpy as np

from gnnstore.common import distinct


def test_distinct_in_order_keeps_first_appearances() -> None:
    assert distinct.distinct_in_order(np.array([5, 1, 9])).tolist() == [5, 1, 9]
    assert distinct.distinct_in_order(np.array([5, 1, 5, 0, 1, 7])).tolist() == [5, 1, 0, 7]
    assert distinct.distinct_in_order(np.array([], dtype=np.int64)).tolist() == []
    ids = np.random.default_rng(0).integers(0, 500, 2000)  # long enough to read ahead, many repeats
    _, first = np.unique(ids, return_index=True)
    assert distinct.distinct_in_order(ids).tolist() == ids[np.sort(first)].tolist()
