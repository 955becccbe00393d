"""FeatureCache: exact rows under every policy, byte bounds, counters, scan resistance, bad input."""
from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch

from gnnstore.client.feature_cache import POLICY_NAMES, FeatureCache
from gnnstore.common.attr_schema import AttrSchema
from gnnstore.common.errors import InvalidRequestError, NotFoundError
from gnnstore.proto.feature_request import HotPrefix


class Source:
    """The row source behind the cache: a tensor, recording each fetch."""

    def __init__(self, x: torch.Tensor) -> None:
        self.x, self.calls = x, []

    def __call__(self, ids: torch.Tensor) -> torch.Tensor:
        self.calls.append(ids.clone())
        return self.x[ids]


def make_cache(x: torch.Tensor, rows: int, policy: str, **kwargs) -> FeatureCache:
    row_bytes = x[0].numel() * x.element_size()
    spec = AttrSchema("paper", "x", x.dtype, tuple(x.shape))
    return FeatureCache(rows * row_bytes, [spec], policy=policy, **kwargs)


def random_features(n: int, dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    if dtype.is_floating_point:
        return torch.randn(n, 2, 3, generator=gen).to(dtype)
    return torch.randint(-(2**40), 2**40, (n, 2, 3), generator=gen, dtype=dtype)


@pytest.mark.parametrize("policy", POLICY_NAMES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_rows_are_bit_identical_on_random_streams(policy: str, dtype: torch.dtype) -> None:
    gen = torch.Generator().manual_seed(0)
    x = random_features(300, dtype, gen)
    src, cache = Source(x), make_cache(x, 60, policy)
    cache.warm("paper", torch.arange(100, 0, -1), {"x": x[torch.arange(100, 0, -1)]})
    for _ in range(40):
        ids = torch.randint(0, 300, (int(torch.randint(0, 90, (1,), generator=gen)),), generator=gen)
        ids = torch.cat([ids, ids[:5]])  # duplicates kept
        out = cache.read("paper", "x", ids.to(torch.int32), src)
        assert out.dtype == dtype and torch.equal(out.view(torch.uint8), x[ids].view(torch.uint8))
    assert cache.nbytes <= cache.capacity_bytes
    for ids in src.calls:  # only distinct misses travel
        assert ids.numel() == torch.unique(ids).numel()


@pytest.mark.parametrize("policy", POLICY_NAMES)
def test_rows_already_in_place_are_kept_and_only_the_rest_fetched(policy: str) -> None:
    x = torch.arange(300, dtype=torch.float32).view(-1, 1) * 10
    src, cache = Source(x), make_cache(x, 60, policy)
    cache.warm("paper", torch.arange(40), {"x": x[:40]})
    ids = torch.tensor([5, 250, 7, 120, 250, 121, 5, 200])  # hits 5 and 7; 250 twice
    into = torch.full((ids.numel(), 1), -1.0)
    written = np.array([False, True, False, True, True, False, False, False])  # as a server would
    into[written] = x[ids[written]]
    (out,) = cache.read_group("paper", ["x"], ids, lambda missing: [src(missing)], into=[into], written=written)
    assert out is into and torch.equal(out, x[ids])
    assert [c.tolist() for c in src.calls] == [[121, 200]]  # not the rows already written
    if cache.policy != "static":  # every miss was admitted, written in place or fetched
        assert torch.equal(cache.lookup("paper", "x", torch.tensor([250, 120, 121, 200]))[1], torch.ones(4, dtype=torch.bool))


def test_locate_places_hits_and_names_misses_and_fill_places_and_keeps_them() -> None:
    x = torch.arange(100, dtype=torch.float32).view(-1, 1)
    cache = make_cache(x, 20, "static+lru")
    cache.warm("paper", torch.arange(10), {"x": x[:10]})
    ids = torch.tensor([3, 50, 7, 60, 50])
    read = cache.locate("paper", ["x"], ids)
    assert read.wanted.tolist() == [50, 60]  # distinct, in order of first appearance
    assert read.rows[0][[0, 2]].flatten().tolist() == [3.0, 7.0]  # hits in place before any fill
    assert not cache.lookup("paper", "x", torch.tensor([50]))[1].any()  # nothing kept before fill
    with pytest.raises(InvalidRequestError, match=r"rows for \('paper', 'x'\) must be torch.float32"):
        cache.fill(read, [x[read.wanted].double()])
    (out,) = cache.fill(cache.locate("paper", ["x"], ids), [x[read.wanted]])
    assert torch.equal(out, x[ids])
    assert cache.lookup("paper", "x", torch.tensor([50, 60]))[1].all()  # admitted by fill
    assert cache.locate("paper", ["x"], ids).wanted.numel() == 0


@pytest.mark.parametrize("policy", POLICY_NAMES)
def test_rows_sent_for_exactly_the_misses_are_placed_with_the_hits_in_one_read(policy: str) -> None:
    gen = torch.Generator().manual_seed(3)
    x = random_features(300, torch.float32, gen)
    labels = torch.randint(0, 9, (300,), generator=gen)
    specs = [AttrSchema("paper", "x", "float32", tuple(x.shape)), AttrSchema("paper", "y", "int64", (300,))]
    cache = FeatureCache(60 * (24 + 8), specs, policy=policy)
    cache.warm("paper", torch.arange(50), {"x": x[:50], "y": labels[:50]})
    for _ in range(20):
        ids = torch.randint(0, 300, (80,), generator=gen)
        missing = cache.locate("paper", ["x", "y"], ids).wanted  # what a server would have left out
        read = cache.locate("paper", ["x", "y"], ids, sent=(missing, [x[missing], labels[missing]]))
        assert read.wanted.numel() == 0
        out_x, out_y = cache.fill(read, [])
        assert torch.equal(out_x.view(torch.uint8), x[ids].view(torch.uint8)) and torch.equal(out_y, labels[ids])
        rows, held = cache.lookup("paper", "x", missing)  # sent rows are admitted as fetched ones are
        assert torch.equal(rows, x[missing][held]) and bool(held.any()) == (policy != "static" and missing.numel() > 0)


def test_rows_sent_for_more_ids_than_the_misses_serve_them_in_the_same_pass() -> None:
    x = torch.arange(100, dtype=torch.float32).view(-1, 1)
    cache = make_cache(x, 20, "static")
    cache.warm("paper", torch.arange(10), {"x": x[:10]})
    ids = torch.tensor([3, 50, 7, 60, 50, 4])
    sent = torch.tensor([3, 50, 7, 60])  # 3 and 7 were sent too (the cache took them in since the request)
    read = cache.locate("paper", ["x"], ids, sent=(sent, [x[sent]]))
    assert read.wanted.numel() == 0 and torch.equal(cache.fill(read, [])[0], x[ids])


def test_rows_sent_for_other_ids_than_the_misses_are_left_and_the_misses_named() -> None:
    x = torch.arange(100, dtype=torch.float32).view(-1, 1)
    cache = make_cache(x, 20, "static")
    cache.warm("paper", torch.arange(10), {"x": x[:10]})
    ids = torch.tensor([3, 50, 7, 60])
    read = cache.locate("paper", ["x"], ids, sent=(torch.tensor([60, 50]), [x[[60, 50]]]))  # another order
    assert read.wanted.tolist() == [50, 60]
    read = cache.locate("paper", ["x"], ids, sent=(torch.tensor([3, 50]), [x[[3, 50]]]))  # 60 evicted: not sent
    assert read.wanted.tolist() == [50, 60]
    assert torch.equal(cache.fill(read, [x[read.wanted]])[0], x[ids])
    with pytest.raises(InvalidRequestError, match=r"rows for \('paper', 'x'\) must be torch.float32"):
        cache.locate("paper", ["x"], ids, sent=(torch.tensor([50, 60]), [x[[50, 60]].double()]))


def test_the_hot_prefix_is_the_warmed_ranking_up_to_a_repeat_and_forgotten_on_clear() -> None:
    x = torch.arange(100, dtype=torch.float32).view(-1, 1)
    cache = make_cache(x, 20, "static+sieve")  # a static tier of 10 rows
    assert cache.hot_prefix("paper") is None and cache.hot_prefix("author") is None
    cache.warm("paper", torch.arange(30), {"x": x[:30]}, ranking="snap-1")
    assert cache.hot_prefix("paper") == HotPrefix(10, "snap-1")  # as many as the tier holds
    cache.warm("paper", torch.tensor([4, 5, 4, 6]), {"x": x[[4, 5, 4, 6]]}, ranking="snap-1")
    assert cache.hot_prefix("paper") == HotPrefix(2, "snap-1")  # the repeat ends the prefix
    cache.warm("paper", torch.arange(10), {"x": x[:10]})
    assert cache.hot_prefix("paper") is None  # warmed from no ranking: the ids must be named
    cache.warm("paper", torch.arange(10), {"x": x[:10]}, ranking="snap-2")
    cache.clear()
    assert cache.hot_prefix("paper") is None


def test_a_target_that_does_not_fit_is_refused_by_name() -> None:
    x = torch.zeros(10, 3)
    cache = make_cache(x, 5, "lru")
    with pytest.raises(InvalidRequestError, match="attr 'x' cannot go into a torch.float64 tensor of shape"):
        cache.read_group("paper", ["x"], torch.arange(4), lambda m: [x[m]], into=[torch.zeros(4, 3, dtype=torch.float64)])


@pytest.mark.parametrize("policy", POLICY_NAMES)
def test_fetch_gets_only_the_misses_and_residents_stay_within_capacity(policy: str) -> None:
    x = torch.arange(200, dtype=torch.float32).view(-1, 1)
    src, cache = Source(x), make_cache(x, 50, policy)
    cache.warm("paper", torch.arange(50), {"x": x[:50]})
    rng = np.random.default_rng(1)
    for _ in range(30):
        ids = torch.from_numpy(rng.integers(0, 200, 40))
        _, hit = cache.lookup("paper", "x", ids)
        src.calls.clear()
        cache.read("paper", "x", ids, src)
        expected = list(dict.fromkeys(ids[~hit].tolist()))  # distinct, in order of first appearance
        assert (src.calls[0].tolist() == expected if expected else src.calls == [])
        _, resident = cache.lookup("paper", "x", torch.arange(200))
        assert int(resident.sum()) <= 50


@pytest.mark.parametrize("policy", POLICY_NAMES)
@pytest.mark.parametrize("rows", [0, 1, 7])
def test_a_cache_smaller_than_one_batch_still_answers(policy: str, rows: int) -> None:
    x = torch.randn(500, 4)
    src, cache = Source(x), make_cache(x, rows, policy)
    for start in range(0, 500, 100):
        ids = torch.arange(start, start + 100).flip(0)
        assert torch.equal(cache.read("paper", "x", ids, src), x[ids])
    assert len(src.calls) == 5 and cache.nbytes <= cache.capacity_bytes


@pytest.mark.parametrize(
    ("policy", "resident"), [("lru", [2, 4, 5]), ("sieve", [0, 4, 5])]
)
def test_counters_and_contents_on_a_hand_checked_sequence(policy: str, resident: list[int]) -> None:
    x = torch.arange(10, dtype=torch.float32).view(-1, 1)
    src, cache = Source(x), make_cache(x, 3, policy)
    for ids in ([0, 1, 2], [0], [3], [1], [0, 2], [4], [5]):
        cache.read("paper", "x", torch.tensor(ids), src)
    assert (cache.hits, cache.misses, cache.dynamic_hits, cache.static_hits) == (2, 8, 2, 0)
    assert cache.stats().hit_rate == pytest.approx(0.2) and cache.miss_rate == pytest.approx(0.8)
    rows, hit = cache.lookup("paper", "x", torch.arange(10))
    assert torch.nonzero(hit).view(-1).tolist() == resident
    assert torch.equal(rows, x[resident])


@pytest.mark.parametrize(("policy", "hot_hits"), [("sieve", 50), ("lru", 0)])
def test_sieve_keeps_a_hot_set_through_a_one_pass_scan_lru_loses_it(policy: str, hot_hits: int) -> None:
    x = torch.randn(2000, 1)
    src, cache = Source(x), make_cache(x, 100, policy)
    hot = torch.arange(50)
    cache.read("paper", "x", hot, src)
    cache.read("paper", "x", hot, src)
    for start in range(100, 1100, 10):
        cache.read("paper", "x", torch.arange(start, start + 10), src)
    cache.start_epoch()
    cache.read("paper", "x", hot, src)
    assert cache.stats().hits == hot_hits


def test_static_tier_never_evicts_and_is_counted_per_tier() -> None:
    x = torch.randn(1000, 3)
    src, cache = Source(x), make_cache(x, 100, "static+sieve", static_fraction=0.5)
    assert cache.warm("paper", torch.arange(999, 0, -1), {"x": x[torch.arange(999, 0, -1)]}) == 50
    for start in range(0, 900, 30):
        cache.read("paper", "x", torch.arange(start, start + 30), src)
    cache.start_epoch()
    cache.read("paper", "x", torch.arange(949, 1000), src)  # 999..950 were warmed
    stats = cache.stats()
    assert (stats.static_hits, stats.dynamic_hits, stats.misses) == (50, 0, 1)
    cache.read("paper", "x", torch.tensor([885, 886]), src)  # the last scanned rows are dynamic
    assert cache.stats().dynamic_hits == 2


def test_epoch_windows_report_and_reset() -> None:
    x = torch.randn(10, 2)
    src, cache = Source(x), make_cache(x, 10, "sieve")
    cache.read("paper", "x", torch.tensor([1, 2, 2]), src)
    ended = cache.start_epoch()
    assert (ended.hits, ended.misses) == (0, 2)
    cache.read("paper", "x", torch.tensor([1, 2, 3]), src)
    assert (cache.stats().hits, cache.stats().misses, cache.hits, cache.misses) == (2, 1, 2, 3)


def test_budget_is_shared_as_one_fraction_of_every_node_type() -> None:
    specs = [
        AttrSchema("paper", "x", torch.float32, (1000, 16)),
        AttrSchema("author", "x", torch.float64, (400, 4)),
        AttrSchema("paper", "y", "int64", (1000,)),
    ]
    total = 1000 * 64 + 400 * 32 + 1000 * 8
    cache = FeatureCache(total // 4, specs, policy="lru")
    assert cache.nbytes <= total // 4
    for group, n in (("paper", 1000), ("author", 400)):
        rows = {s.attr_name: torch.zeros(s.shape, dtype=getattr(torch, s.dtype)) for s in specs if s.group_name == group}
        assert cache.insert(group, torch.arange(n), rows) == n // 4


def test_insert_refreshes_resident_rows_and_clear_empties() -> None:
    x = torch.randn(20, 2)
    src, cache = Source(x), make_cache(x, 20, "sieve")
    cache.read("paper", "x", torch.arange(5), src)
    new = torch.randn(2, 2)
    assert cache.insert("paper", torch.tensor([3, 3]), {"x": new[[1, 1]]}) == 1
    assert torch.equal(cache.read("paper", "x", torch.tensor([3]), src), new[[1]])
    cache.clear()
    assert not cache.lookup("paper", "x", torch.arange(20))[1].any()


def test_a_node_is_cached_for_every_attr_of_its_type_or_none() -> None:
    specs = [AttrSchema("paper", "x", torch.float32, (100, 2)), AttrSchema("paper", "y", torch.int64, (100,))]
    x, y = torch.randn(100, 2), torch.arange(100)
    cache = FeatureCache(100 * 16, specs, policy="static+sieve", static_fraction=0.5)
    cache.warm("paper", torch.tensor([9, 3, 5]), {"x": x[[9, 3, 5]], "y": y[[9, 3, 5]]})
    cache.insert("paper", torch.tensor([1, 2]), {"x": x[[1, 2]], "y": y[[1, 2]]})
    assert sorted(cache.known_ids("paper").tolist()) == [3, 5, 9]
    assert sorted(cache.known_ids("paper", include_dynamic=True).tolist()) == [1, 2, 3, 5, 9]
    assert cache.known_ids("author").numel() == 0
    # one attr read alone is answered but not admitted: the other attr would lack the row
    assert torch.equal(cache.read("paper", "x", torch.tensor([7, 3]), lambda m: x[m]), x[[7, 3]])
    assert 7 not in cache.known_ids("paper", include_dynamic=True).tolist()
    fetched = []

    def fetch(m: torch.Tensor) -> list[torch.Tensor]:
        fetched.append(m)
        return [x[m], y[m]]

    out = cache.read_group("paper", ["x", "y"], torch.tensor([7, 3, 7]), fetch)
    assert torch.equal(out[0], x[[7, 3, 7]]) and torch.equal(out[1], y[[7, 3, 7]])
    assert [m.tolist() for m in fetched] == [[7]] and 7 in cache.known_ids("paper", include_dynamic=True)
    with pytest.raises(InvalidRequestError, match=r"must name every cached attr \['x', 'y'\]; got \['x'\]"):
        cache.insert("paper", torch.tensor([4]), {"x": x[[4]]})


def test_ids_beyond_the_schema_grow_the_map() -> None:
    x = torch.randn(50, 2)
    src, cache = Source(x), make_cache(x[:10], 5, "lru")
    assert torch.equal(cache.read("paper", "x", torch.tensor([49, 3]), src), x[[49, 3]])
    assert cache.lookup("paper", "x", torch.tensor([49]))[1].all()


def test_id_maps_cost_four_bytes_a_node_id_and_eight_a_cached_row() -> None:
    x = torch.randn(2000, 2)
    src, cache = Source(x), make_cache(x[:1000], 100, "static+sieve")
    assert cache.index_bytes == 1000 * 4 + 100 * 8
    assert torch.equal(cache.read("paper", "x", torch.tensor([1999, 7]), src), x[[1999, 7]])
    assert cache.index_bytes == 2000 * 4 + 100 * 8  # grown, still 4 bytes an id


def test_bad_input_is_refused_and_loses_nothing() -> None:
    x = torch.randn(20, 2)
    src, cache = Source(x), make_cache(x, 20, "sieve")
    cache.read("paper", "x", torch.arange(4), src)
    with pytest.raises(NotFoundError, match="no attr 'y' of node type 'paper'"):
        cache.read("paper", "y", torch.arange(4), src)
    with pytest.raises(NotFoundError, match="no node type 'author'"):
        cache.read("author", "x", torch.arange(4), src)
    with pytest.raises(InvalidRequestError, match="negative id -1 for node type 'paper'"):
        cache.read("paper", "x", torch.tensor([1, -1]), src)
    with pytest.raises(InvalidRequestError, match="must be int32 or int64; got torch.float32"):
        cache.read("paper", "x", torch.tensor([1.0]), src)
    with pytest.raises(InvalidRequestError, match=r"torch.float32 of shape \(1, 2\); got torch.float64"):
        cache.read("paper", "x", torch.tensor([9]), lambda ids: x[ids].double())
    with pytest.raises(InvalidRequestError, match="unknown cache policy 'arc'"):
        make_cache(x, 4, "arc")
    rows, hit = cache.lookup("paper", "x", torch.arange(10))
    assert hit.tolist() == [True] * 4 + [False] * 6 and torch.equal(rows, x[:4])


def test_pickled_cache_keeps_rows_and_works() -> None:
    x = torch.randn(20, 2)
    src, cache = Source(x), make_cache(x, 20, "static+sieve")
    cache.warm("paper", torch.arange(5), {"x": x[:5]})
    copy = pickle.loads(pickle.dumps(cache))
    assert torch.equal(copy.read("paper", "x", torch.arange(8), src), x[:8])
    assert copy.static_hits == 5


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device; the CPU path runs above")
@pytest.mark.parametrize("policy", POLICY_NAMES)
def test_cuda_resident_cache_returns_exact_rows_on_the_gpu(policy: str) -> None:
    x = torch.randn(1000, 8)
    src, cache = Source(x), make_cache(x, 200, policy, device="cuda")
    cache.warm("paper", torch.arange(100), {"x": x[:100]})
    rng = np.random.default_rng(2)
    for _ in range(20):
        ids = torch.from_numpy(rng.integers(0, 1000, 300))
        out = cache.read("paper", "x", ids, src)
        assert out.is_cuda and torch.equal(out.cpu(), x[ids])
    assert cache.hits > 0


def test_an_index_edited_in_place_between_reads_is_read_afresh() -> None:
    x = torch.randn(30, 2)
    specs = [AttrSchema(None, "x", x.dtype, x.shape), AttrSchema(None, "z", x.dtype, x.shape)]
    cache = FeatureCache(10 * 8 * 2, specs)
    ids = torch.tensor([4, 1, 4])
    assert torch.equal(cache.read(None, "x", ids, lambda m: x[m]), x[ids])
    ids[0] = 7  # the same tensor object, new contents
    assert torch.equal(cache.read(None, "z", ids, lambda m: x[m]), x[ids])


def test_a_pickled_cache_owns_its_rows_even_through_torch_shared_memory() -> None:
    """Spawned loader workers get the cache through torch's pickler, which moves tensors to
    shared memory: without a copy of its own, a worker's evictions overwrote another's rows."""
    import pickle
    from multiprocessing.reduction import ForkingPickler

    import torch.multiprocessing  # noqa: F401 - registers torch's shared-memory reductions

    from gnnstore.client.feature_cache import FeatureCache
    from gnnstore.common.attr_schema import AttrSchema

    cache = FeatureCache(1 << 12, [AttrSchema(None, "x", torch.float32, (100, 4))], policy="sieve")
    first, second = (pickle.loads(ForkingPickler.dumps(cache)) for _ in range(2))
    for value, copy in enumerate((cache, first, second), start=1):  # distinct fills (ids could collide)
        (slot,) = copy._slots.values()
        slot.storage["x"].fill_(float(value))
    (original,), (one,), (other,) = (c._slots.values() for c in (cache, first, second))
    assert not torch.equal(original.storage["x"], one.storage["x"])
    assert not torch.equal(one.storage["x"], other.storage["x"])
