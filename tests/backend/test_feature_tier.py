"""FeatureTier: exports (mapped or in memory) equal RocksDB's rows, versioned with it, swapped atomically."""
from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from gnnstore.backend.features import feature_tier, resident_arrays
from gnnstore.backend.features.direct_reads import DirectRows
from gnnstore.backend.features.feature_tier import FeatureTier
from gnnstore.backend.features.mapped_reads import MappedRows, ReadPool
from gnnstore.backend.features.memory_limit import MemoryLimit
from gnnstore.backend.features.tiered_feature_store import RowQuery, TieredFeatureStore
from gnnstore.common.errors import InvalidRequestError, NotFoundError, PreconditionError
from gnnstore.common.row_copy import row_words
from gnnstore.stores.rocksdb_feature_store import RocksDBFeatureStore
from gnnstore.stores.rocksdb_rows import RocksDBRows

FEATURES = {
    ("paper", "x"): torch.randn(700, 6),
    ("paper", "year"): torch.randint(-(2**40), 2**40, (700,)),
    ("author", "x"): torch.randn(90, 2, 3).to(torch.bfloat16),
    ("author", "flag"): torch.rand(90) > 0.5,
    (("author", "writes", "paper"), "w"): torch.randn(50, 1).double(),
    (None, "empty"): torch.empty(0, 4),
}


@pytest.fixture
def store(tmp_path: Path) -> RocksDBFeatureStore:
    with RocksDBFeatureStore(tmp_path / "features") as s:
        for (group, attr), x in FEATURES.items():
            s.put_tensor(x, group_name=group, attr_name=attr, index=None)
        yield s


@pytest.fixture(params=["memory-mapped", "in memory"])
def tier(
    tmp_path: Path, store: RocksDBFeatureStore, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> FeatureTier:
    monkeypatch.setattr(feature_tier, "EXPORT_CHUNK_BYTES", 1000)  # several chunks per array
    monkeypatch.setattr(resident_arrays, "COPY_CHUNK_BYTES", 1000)  # several chunks per array
    t = FeatureTier(tmp_path / "tier", resident_bytes=0 if request.param == "memory-mapped" else 1 << 30)
    assert t.refresh(store.rows)
    assert t.snapshot().resident == (request.param == "in memory")
    return t


def bits(rows: torch.Tensor | np.ndarray) -> np.ndarray:
    """The bytes of rows, a tensor's or the tier's array's (bfloat16 there as raw words)."""
    if isinstance(rows, torch.Tensor):
        return rows.contiguous().view(torch.uint8).numpy()
    return np.ascontiguousarray(rows).view(np.uint8)


@pytest.mark.parametrize(("group", "attr"), list(FEATURES))
@pytest.mark.parametrize("id_dtype", [torch.int32, torch.int64])
def test_gather_is_bit_identical_to_rocksdb(
    tier: FeatureTier, store: RocksDBFeatureStore, group: object, attr: str, id_dtype: torch.dtype
) -> None:
    n = FEATURES[(group, attr)].shape[0]
    gen = torch.Generator().manual_seed(3)
    for size in (0, 1, 300):
        ids = torch.randint(0, max(n, 1), (size if n else 0,), generator=gen, dtype=id_dtype)
        ids = torch.cat([ids, ids[:7]])  # duplicates kept, in order
        got = tier.gather(group, attr, ids)
        want = store.get_tensor(group_name=group, attr_name=attr, index=ids.long())
        assert got.shape == want.shape and np.array_equal(bits(got), bits(want))


def test_the_tier_is_versioned_with_the_store_and_reopens(tmp_path: Path, store: RocksDBFeatureStore, tier: FeatureTier) -> None:
    assert tier.version == store.version() and tier.is_current(store.rows)
    assert not tier.refresh(store.rows)
    reopened = FeatureTier(tmp_path / "tier")
    assert reopened.version == store.version()
    assert np.array_equal(reopened.gather("paper", "x", [4, 2]), FEATURES[("paper", "x")][[4, 2]].numpy())


def test_rebuild_and_swap_keeps_old_readers_consistent(tmp_path: Path, store: RocksDBFeatureStore, tier: FeatureTier) -> None:
    old = tier.snapshot()
    old_x = FEATURES[("paper", "x")]
    new_rows = torch.full((2, 6), 7.0)
    store.put_tensor(new_rows, group_name="paper", attr_name="x", index=torch.tensor([1, 699]))
    assert not tier.is_current(store.rows)
    assert tier.refresh(store.rows)
    assert tier.version == store.version() != old.version
    assert np.array_equal(tier.gather("paper", "x", [699, 0, 1]), torch.stack([new_rows[1], old_x[0], new_rows[0]]).numpy())
    # the old version's folder is gone from disk, yet a reader holding it reads the old rows
    assert not old.path.exists()
    assert np.array_equal(old.array("paper", "x").gather([699, 1]), old_x[[699, 1]].numpy())
    versions = [p.name for p in (tmp_path / "tier").iterdir() if p.is_dir()]
    assert versions == [tier.snapshot().path.name]


def test_an_export_that_overlaps_a_write_is_retried(tmp_path: Path, store: RocksDBFeatureStore) -> None:
    class WriteDuringFirstRead(RocksDBRows):
        writes_left = 1

        def read(self, group, name, index=None):  # noqa: ANN001, ANN202
            if self.writes_left:
                self.writes_left -= 1
                self.write("paper", "x", np.zeros((1, 6), np.float32), "float32", np.array([3]))
            return super().read(group, name, index)

    path = store.path
    store.close()
    with WriteDuringFirstRead(path) as writer:
        tier = FeatureTier(tmp_path / "tier")
        tier.refresh(writer)
        assert tier.version == writer.version()
        assert np.array_equal(tier.gather("paper", "x", [3]), np.zeros((1, 6), np.float32))


def test_leftover_builds_are_swept_on_refresh(tmp_path: Path, store: RocksDBFeatureStore, tier: FeatureTier) -> None:
    (tmp_path / "tier" / ".build-crashed").mkdir()
    store.put_tensor(torch.ones(1, 6), group_name="paper", attr_name="x", index=torch.tensor([0]))
    tier.refresh(store.rows)
    assert not (tmp_path / "tier" / ".build-crashed").exists()


def test_bad_requests_name_type_attr_and_id(tmp_path: Path, tier: FeatureTier) -> None:
    with pytest.raises(InvalidRequestError, match="id 700 is out of range for node type 'paper', attr 'x' \\(valid ids: 0..699\\)"):
        tier.gather("paper", "x", torch.tensor([1, 700]))
    with pytest.raises(InvalidRequestError, match="id -2 is out of range for node type 'author'"):
        tier.gather("author", "x", np.array([-2]))
    with pytest.raises(InvalidRequestError, match="must be integers; got float32"):
        tier.gather("paper", "x", torch.tensor([1.0]))
    with pytest.raises(NotFoundError, match="no attr 'y' of node type 'paper'"):
        tier.gather("paper", "y", [0])
    with pytest.raises(PreconditionError, match="is empty; call refresh"):
        FeatureTier(tmp_path / "nothing").gather("paper", "x", [0])
    assert np.array_equal(tier.gather("paper", "x", [0]), FEATURES[("paper", "x")][[0]].numpy())


def test_a_corrupt_version_folder_is_reported(tmp_path: Path, tier: FeatureTier) -> None:
    (tier.snapshot().path / "0.npy").write_bytes(b"not an array")
    with pytest.raises(PreconditionError, match="unreadable"):
        FeatureTier(tmp_path / "tier")


@pytest.mark.parametrize("tier_current", [True, False], ids=["from-the-tier", "tier-behind-the-store"])
def test_placed_rows_land_at_their_positions_and_nowhere_else(
    tmp_path: Path, store: RocksDBFeatureStore, tier: FeatureTier, tier_current: bool
) -> None:
    if not tier_current:  # a put the tier has not caught up with: reads fall back to RocksDB
        store.put_tensor(torch.zeros(3, 6), group_name="paper", attr_name="x", index=torch.tensor([0, 1, 2]))
    reader = TieredFeatureStore(store.rows, tier)
    ids, at = np.array([5, 9, 5]), np.array([4, 0, 2])
    x = store.get_tensor(group_name="paper", attr_name="x", index=None).numpy()

    def sentinel(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        return np.full(shape, -7.0, dtype)

    (got,) = reader.read([RowQuery("paper", "x", ids)], sentinel, [(at, 6)])
    assert got.shape == (6, 6)
    assert np.array_equal(got[at], x[ids])
    assert bool((got[[1, 3, 5]] == -7.0).all())  # rows left for the client to fill are untouched


def test_attrs_sharing_one_index_read_their_own_rows_and_ranges(store: RocksDBFeatureStore, tier: FeatureTier) -> None:
    reader = TieredFeatureStore(store.rows, tier)
    ids = np.array([3, 80, 3])
    x, year = reader.read([RowQuery("paper", "x", ids), RowQuery("paper", "year", ids)])
    assert np.array_equal(x, FEATURES[("paper", "x")][ids].numpy())
    assert np.array_equal(year, FEATURES[("paper", "year")][ids].numpy())
    beyond_authors = np.array([1, 95])  # within paper's 700 rows, past author's 90
    with pytest.raises(InvalidRequestError, match="'author'.'flag': id 95 is out of range"):
        reader.read([RowQuery("paper", "x", beyond_authors), RowQuery("author", "flag", beyond_authors)])


def _inodes(snapshot: feature_tier.TierSnapshot) -> dict:
    manifest = __import__("json").loads((snapshot.path / feature_tier.MANIFEST).read_text())
    return {
        (feature_tier._group_key(e["group_name"]), e["attr_name"]): (snapshot.path / e["file"]).stat().st_ino
        for e in manifest["arrays"]
    }


@pytest.mark.parametrize(
    "write",
    [
        "rows",  # a few rows of one attr: a copy of its array with those rows rewritten
        "many rows",  # most rows: that attr exported again
        "whole",  # one attr put whole
        "new",  # a new attr
        "remove",  # one attr removed
    ],
)
def test_a_change_rewrites_only_what_it_changed(tier: FeatureTier, store: RocksDBFeatureStore, write: str) -> None:
    from gnnstore.backend.features.feature_tier import Change

    before = tier.snapshot()
    old_rows, old = torch.from_numpy(np.array(before.array("paper", "x").rows)), _inodes(before)
    base = store.version()
    key, ids = ("paper", "x"), None
    if write == "rows":
        ids = np.array([3, 699, 3, 0])
        store.put_tensor(torch.full((4, 6), 7.0), group_name="paper", attr_name="x", index=torch.from_numpy(ids))
    elif write == "many rows":
        ids = np.arange(500)
        store.put_tensor(torch.full((500, 6), 7.0), group_name="paper", attr_name="x", index=torch.from_numpy(ids))
    elif write == "whole":
        store.put_tensor(torch.ones(700, 6), group_name="paper", attr_name="x", index=None)
    elif write == "new":
        key = ("paper", "z")
        store.put_tensor(torch.arange(700.0), group_name="paper", attr_name="z", index=None)
    else:
        store.remove_tensor(group_name="paper", attr_name="x", index=None)
    assert tier.refresh(store.rows, Change(base, *key, ids))
    after = tier.snapshot()
    new = _inodes(after)
    for other in set(old) & set(new) - {key}:
        assert old[other] == new[other], f"{other} was written again"  # a hard link, not a copy
    assert (key in new) == (write != "remove")
    if after.resident:  # unchanged arrays keep their copy in memory; the changed one is read anew
        for other in set(old) & set(new):
            assert (after.array(*other).rows is before.array(*other).rows) == (other != key)
    for group, attr in new:
        got = after.array(group, attr).gather(np.arange(after.array(group, attr).rows.shape[0]))
        assert np.array_equal(bits(got), bits(store.get_tensor(group_name=group, attr_name=attr, index=None)))
    # A reader holding the old version keeps reading the old rows (its folder is gone by now).
    assert not before.path.exists()
    assert torch.equal(torch.from_numpy(np.array(before.array("paper", "x").rows)), old_rows)


def test_a_change_from_another_base_version_exports_everything(tier: FeatureTier, store: RocksDBFeatureStore) -> None:
    from gnnstore.backend.features.feature_tier import Change

    before = _inodes(tier.snapshot())
    store.put_tensor(torch.ones(1, 6), group_name="paper", attr_name="x", index=torch.tensor([0]))
    assert tier.refresh(store.rows, Change("some-other-version", "paper", "x", np.array([0])))
    assert not set(before.values()) & set(_inodes(tier.snapshot()).values())
    assert tier.is_current(store.rows)


@pytest.mark.parametrize("page_cache_bytes", [None, 0], ids=["through the page cache", "straight from disk"])
def test_arrays_within_the_budget_are_held_in_memory_narrowest_rows_first_and_the_rest_read_from_disk(
    tmp_path: Path, store: RocksDBFeatureStore, page_cache_bytes: int | None
) -> None:
    exported = FeatureTier(tmp_path / "tier")
    assert exported.refresh(store.rows)
    total = exported.snapshot().nbytes
    for budget in (0, total // 2, total - 1, total):
        reopened = FeatureTier(tmp_path / "tier", resident_bytes=budget, page_cache_bytes=page_cache_bytes)
        assert not reopened.refresh(store.rows)
        snap = reopened.snapshot()
        assert snap.resident == (budget == total)
        held = [a for a in snap.arrays.values() if a.reads is None]
        assert sum(a.rows.nbytes for a in held) <= budget
        for array in snap.arrays.values():
            if array.reads is None:
                assert array.resident_from is not None
            else:  # no array left on disk would have fitted beside those held
                assert array.rows.nbytes > budget - sum(a.rows.nbytes for a in held)
                want = DirectRows if page_cache_bytes == 0 and _direct_io_works(tmp_path) else MappedRows
                assert isinstance(array.reads, want)
        for (group, attr), array in snap.arrays.items():
            assert not array.rows.flags.writeable or not array.rows.size
            want = store.get_tensor(group_name=group, attr_name=attr, index=None)
            assert np.array_equal(bits(array.gather(np.arange(array.rows.shape[0]))), bits(want))
            shuffled = np.random.default_rng(0).permutation(array.rows.shape[0]).repeat(2)
            assert np.array_equal(bits(array.gather(shuffled)), bits(want[torch.from_numpy(shuffled)]))


@pytest.mark.parametrize(("dtype", "width"), [("<f4", 1024), ("<f4", 100), ("<u1", 3)],
                         ids=["a page a row", "rows across pages", "odd bytes"])
def test_rows_read_straight_from_disk_by_several_readers_and_cached_are_exact(
    tmp_path: Path, dtype: str, width: int
) -> None:
    if not _direct_io_works(tmp_path):
        pytest.skip("this filesystem refuses O_DIRECT (tmpfs)")
    count = 6000  # several queues of 4 KiB rows: the reads spread over every reader
    rows = np.random.default_rng(0).integers(0, 255, (count, width)).astype(dtype)
    np.save(tmp_path / "rows.npy", rows)
    mapped = np.load(tmp_path / "rows.npy", mmap_mode="r")
    row_bytes = rows[:1].nbytes
    budget = 4 * count + 1000 * (row_bytes + 9)  # a slot per row, and 1000 rows with their slots' entries
    reads = DirectRows.open(tmp_path / "rows.npy", mapped.offset, rows.shape, row_bytes, ReadPool(), budget)
    assert reads is not None and reads.cache.capacity == 1000 and reads.cache.nbytes <= budget
    ids = np.random.default_rng(1).integers(0, count, 5000)  # duplicates, and more rows than the cache holds
    for _ in range(2):  # the second gather finds some rows in the cache
        out = np.zeros((ids.size + 1, width), dtype=dtype)
        at = np.random.default_rng(2).permutation(ids.size + 1)[: ids.size]
        reads.copy(row_words(out), at, ids)
        assert np.array_equal(out[at], rows[ids])
        left = np.setdiff1d(np.arange(ids.size + 1), at)
        assert not out[left].any()  # no row written where none was asked


def test_the_tier_caches_rows_read_from_disk_within_its_cache_budget(
    tmp_path: Path, store: RocksDBFeatureStore
) -> None:
    if not _direct_io_works(tmp_path):
        pytest.skip("this filesystem refuses O_DIRECT (tmpfs)")
    assert FeatureTier(tmp_path / "tier").refresh(store.rows)
    tier = FeatureTier(tmp_path / "tier", resident_bytes=0, page_cache_bytes=0, cache_bytes=20_000)
    tier.refresh(store.rows)
    cached = [a.reads.cache for a in tier.snapshot().arrays.values() if isinstance(a.reads, DirectRows)]
    assert cached and 0 < sum(c.nbytes for c in cached if c is not None) <= 20_000
    assert re.search(r"read straight from disk \(a cache of 0\.00 GiB\)$", tier.describe())
    for _ in range(2):
        assert np.array_equal(tier.gather("paper", "x", [5, 3, 5]), FEATURES[("paper", "x")][[5, 3, 5]].numpy())


def _direct_io_works(folder: Path) -> bool:
    """Whether files in ``folder`` open with ``O_DIRECT`` (tmpfs refuses it)."""
    probe = folder / "direct-io-probe"
    probe.write_bytes(b"x")
    try:
        os.close(os.open(probe, os.O_RDONLY | os.O_DIRECT))
    except OSError:
        return False
    return True


def test_a_reopened_tier_is_mapped_until_a_refresh_brings_the_current_version_into_memory(
    tmp_path: Path, store: RocksDBFeatureStore
) -> None:
    assert FeatureTier(tmp_path / "tier").refresh(store.rows)
    reopened = FeatureTier(tmp_path / "tier", resident_bytes=1 << 30)
    assert not reopened.snapshot().resident  # it may be stale: no copy before the refresh says so
    assert not reopened.refresh(store.rows)  # current: nothing exported...
    assert reopened.snapshot().resident  # ...but now held in memory
    held = reopened.snapshot()
    assert not reopened.refresh(store.rows) and reopened.snapshot() is held  # once
    assert np.array_equal(reopened.gather("paper", "x", [4, 2]), FEATURES[("paper", "x")][[4, 2]].numpy())


def test_the_default_budget_is_a_quarter_of_the_memory_left_and_a_given_one_at_most_half(
    caplog: pytest.LogCaptureFixture,
) -> None:
    limit = MemoryLimit(8 << 30, "cgroup v2 /test")
    assert resident_arrays.resident_budget(123, limit) == 123 and resident_arrays.resident_budget(0, limit) == 0
    assert resident_arrays.resident_budget(None, limit, in_use=0) == 2 << 30
    assert resident_arrays.resident_budget(None, limit, in_use=4 << 30) == 1 << 30  # a quarter of what is left
    assert resident_arrays.resident_budget(None, limit, in_use=9 << 30) == 0
    assert 0 < resident_arrays.resident_budget(None, limit) < 2 << 30  # this process holds something
    assert resident_arrays.resident_budget(4 << 30, limit) == 4 << 30 and not caplog.records
    assert resident_arrays.resident_budget(64 << 30, limit) == 4 << 30
    assert "over half of the 8589934592 bytes this server may use (cgroup v2 /test)" in caplog.text


def test_a_follower_opens_each_version_the_writer_exports_and_never_writes(
    tmp_path: Path, store: RocksDBFeatureStore, tier: FeatureTier
) -> None:
    follower = FeatureTier(tmp_path / "tier", resident_bytes=1 << 30)
    assert follower.follow() and follower.version == tier.version and not follower.follow()
    store.put_tensor(torch.ones(2, 6), group_name="paper", attr_name="x", index=torch.tensor([3, 4]))
    tier.refresh(store.rows)
    assert follower.follow() and follower.version == tier.version
    assert np.array_equal(follower.gather("paper", "x", np.array([3, 4])), np.ones((2, 6), np.float32))
    assert sorted(p.name for p in (tmp_path / "tier").iterdir() if p.is_dir()) == [tier.snapshot().path.name]
    with pytest.raises(PreconditionError, match="has no version yet: its primary exports one"):
        FeatureTier(tmp_path / "empty").follow()
