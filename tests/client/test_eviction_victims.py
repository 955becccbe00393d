"""The eviction policies foretell their next victims, and the cache keeps them out of requests."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from gnnstore.client.cache_policy import EVICTION_POLICIES
from gnnstore.client.feature_cache import FeatureCache
from gnnstore.common.attr_schema import AttrSchema

CAPACITY, BASE = 64, 10


def full_tier(name: str, touched: np.ndarray) -> tuple[object, np.ndarray, np.ndarray]:
    """A policy over positions BASE.. holding ids 0..CAPACITY-1, then hits on ``touched`` ids."""
    policy = EVICTION_POLICIES[name](BASE, CAPACITY)
    id2pos, pos2id = np.full(1000, -1, dtype=np.int64), np.full(BASE + CAPACITY, -1, dtype=np.int64)
    policy.admit(np.arange(CAPACITY, dtype=np.int64), id2pos, pos2id)
    if touched.size:
        policy.touch(id2pos[touched])
    return policy, id2pos, pos2id


@pytest.mark.parametrize("name", sorted(EVICTION_POLICIES))
@pytest.mark.parametrize("admissions", [1, 9, 30, 64, 100])
def test_the_foretold_victims_are_the_ones_evicted(name: str, admissions: int) -> None:
    rng = np.random.default_rng(admissions)
    touched = rng.choice(CAPACITY, 20, replace=False)
    policy, id2pos, pos2id = full_tier(name, touched)
    foretold = set(pos2id[policy.next_victims(admissions)].tolist())
    before = set(pos2id[BASE:].tolist())
    policy.admit(np.arange(500, 500 + admissions, dtype=np.int64), id2pos, pos2id)
    evicted = before - set(pos2id[BASE:].tolist())
    assert evicted <= foretold  # never an eviction it did not foretell
    if name == "lru" or admissions <= CAPACITY - touched.size:  # within SIEVE's first turn: exact
        assert evicted == foretold


@pytest.mark.parametrize("name", sorted(EVICTION_POLICIES))
def test_free_positions_go_first(name: str) -> None:
    policy = EVICTION_POLICIES[name](0, 8)
    id2pos, pos2id = np.full(100, -1, dtype=np.int64), np.full(8, -1, dtype=np.int64)
    policy.admit(np.arange(5, dtype=np.int64), id2pos, pos2id)
    assert policy.next_victims(3).size == 0 and policy.next_victims(5).size == 2


@pytest.mark.parametrize("policy", ["lru", "sieve", "static+sieve"])
def test_ids_named_in_a_request_survive_the_reads_before_its_batch(policy: str) -> None:
    x = torch.arange(1000, dtype=torch.float32).view(-1, 1)
    cache = FeatureCache(200 * 4, [AttrSchema(None, "x", x.dtype, tuple(x.shape))], policy=policy)
    fetch = lambda ids: [x[ids]]  # noqa: E731 - the row source
    cache.read_group(None, ["x"], torch.arange(300), fetch)  # fills the dynamic tier
    cache.read_group(None, ["x"], torch.arange(300, 320), fetch)  # 20 admissions a read
    dynamic_rows = 200 - cache.static_capacity(None)  # all held: nothing was ever hit
    assert cache.known_ids(None, include_static=False, include_dynamic=True).numel() == dynamic_rows
    named = cache.known_ids(None, include_static=False, include_dynamic=True, reads_ahead=2)
    assert named.numel() == dynamic_rows - 2 * 20  # the next two reads' victims are left out
    for start in (400, 420):  # the two reads a prefetcher puts in between
        cache.read_group(None, ["x"], torch.arange(start, start + 20), fetch)
    assert bool(cache.lookup(None, "x", named)[1].all())  # none of them was evicted meanwhile
