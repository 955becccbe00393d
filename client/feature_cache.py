"""A byte-bounded cache of feature rows by (node type, attr, global id), in front of the server.

Its groups are node types, or edge groups for a cache of edge rows by edge id (``EdgeFeatures``
makes one): the same code, with "node" read as "edge".

A read has two halves, so the caller owns the trip to the rows' source: ``locate`` copies the
hits of several attrs of one node type into the batch's rows and says which distinct ids are
wanted; the caller brings their rows (delivered with the sample, or fetched) to ``fill``, which
places and admits them (``read_group`` does both around a fetch function).

A node is cached for every attr of its type or for none: each node type has one slot
(``cache_slot.py``) whose id maps and eviction metadata (numpy arrays on the host) place a
node's rows at the same position of every attr's storage tensor (on ``device``: a GPU for a
CUDA-resident cache). The byte budget is shared by every node type in proportion to its
feature bytes, so a budget of 20% caches 20% of the nodes of every type. Each
step is one pass in numba over the batch.

Policies, by name: ``static`` (a hot set given once by ``warm``, never evicted), ``lru`` and
``sieve`` (dynamic), and ``static+lru`` / ``static+sieve`` (both tiers; a hit in either is
one lookup, the static tier is filled by ``warm`` and the dynamic tier by misses).

Counters count distinct ids per call (one call serves every attr asked for): ``hits``,
``misses``, ``static_hits``, ``dynamic_hits`` since creation, and per epoch through
``start_epoch()`` / ``stats()``.
"""
from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numba
import numpy as np
import torch
from torch import Tensor

from gnnstore.client.batch_buffers import BATCH_BUFFERS
from gnnstore.client.cache_policy import EVICTION_POLICIES
from gnnstore.client.cache_slot import CacheSlot
from gnnstore.common.attr_schema import AttrSchema
from gnnstore.common.cpu_prefetch import prefetch
from gnnstore.common.errors import InvalidRequestError, NotFoundError
from gnnstore.common.row_copy import copy_rows, merge_rows, row_words
from gnnstore.proto.feature_request import HotPrefix

logger = logging.getLogger(__name__)

STATIC = "static"
POLICY_NAMES = (STATIC, *EVICTION_POLICIES, *(f"{STATIC}+{n}" for n in EVICTION_POLICIES))

FetchMissing = Callable[[Tensor], list[Tensor]]

LOCATE_AHEAD = 32
"""Ids whose map entries ``_locate`` requests ahead (measured with cold caches, 33k ids of a
1M-node map: 8 ahead 1.9 ms, 16 1.3 ms, 32 1.1 ms, none 2.0-2.8 ms)."""


@numba.njit(cache=True, nogil=True)
def _locate(
    ids: np.ndarray, id2pos: np.ndarray, pos2id: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where each of ``ids`` is: ``(where, hit_positions, missing)``.

    ``where[i]`` is the storage position of ``ids[i]``, or ``-1 - r`` for ``missing[r]``, the
    distinct missing ids in order of first appearance; ``hit_positions`` holds each distinct
    hit's position once, in the same order. The maps are marked while the call runs (an id
    seen missing, a position seen hit) and restored before it returns.
    """
    n = ids.shape[0]
    where = np.empty(n, dtype=np.int64)
    hits = np.empty(n, dtype=np.int64)
    missing = np.empty(n, dtype=np.int64)
    num_hits = num_missing = 0
    for i in range(n):
        # Both maps are read at random; a trainer's other work (and a server beside it) evicts
        # them from the CPU's caches between batches, so ask for each id's entries ahead.
        if i + LOCATE_AHEAD < n:
            prefetch(id2pos, ids[i + LOCATE_AHEAD])
        if i + LOCATE_AHEAD // 2 < n:
            ahead = id2pos[ids[i + LOCATE_AHEAD // 2]]
            if ahead >= 0:
                prefetch(pos2id, ahead)
        p = id2pos[ids[i]]
        if p >= 0:
            if pos2id[p] >= 0:
                pos2id[p] = -2 - pos2id[p]
                hits[num_hits] = p
                num_hits += 1
            where[i] = p
        elif p == -1:
            id2pos[ids[i]] = -2 - num_missing
            missing[num_missing] = ids[i]
            where[i] = -1 - num_missing
            num_missing += 1
        else:
            where[i] = p + 1
    for j in range(num_hits):
        pos2id[hits[j]] = -2 - pos2id[hits[j]]
    for r in range(num_missing):
        id2pos[missing[r]] = -1
    return where, hits[:num_hits], missing[:num_missing]


def _rows_in_order(ids: np.ndarray, sent: np.ndarray) -> np.ndarray | None:
    """The position in ``sent`` of each of ``ids``, when ``ids`` is a subsequence of ``sent``
    (both in order of first appearance in one batch), else ``None``."""
    row_of = np.empty(ids.shape[0], dtype=np.int64)
    return row_of if _find_in_order(ids, sent, row_of) else None


@numba.njit(cache=True, nogil=True)
def _find_in_order(ids: np.ndarray, sent: np.ndarray, row_of: np.ndarray) -> bool:
    j = 0
    for r in range(ids.shape[0]):
        while j < sent.shape[0] and sent[j] != ids[r]:
            j += 1
        if j == sent.shape[0]:
            return False
        row_of[r] = j
        j += 1
    return True


@dataclass(frozen=True)
class CacheStats:
    """Hits and misses (distinct ids per call) over one window, per tier."""

    hits: int = 0
    misses: int = 0
    static_hits: int = 0
    dynamic_hits: int = 0

    @property
    def hit_rate(self) -> float:
        """Hits over lookups; 0.0 before the first lookup."""
        total = self.hits + self.misses
        return self.hits / total if total else 0.0

    @property
    def miss_rate(self) -> float:
        """Misses over lookups; 0.0 before the first lookup."""
        total = self.hits + self.misses
        return self.misses / total if total else 0.0


@dataclass(frozen=True)
class CacheRead:
    """A read between ``FeatureCache.locate`` and ``fill``: its rows (hits in place) and where
    each id stands (``where``: a storage position, or ``-1 - r`` for ``missing[r]``)."""

    slot: CacheSlot
    attr_names: list[str]
    rows: list[Tensor]
    where: np.ndarray
    missing: np.ndarray
    todo: np.ndarray
    needed: np.ndarray

    @property
    def wanted(self) -> Tensor:
        """The distinct ids whose rows ``fill`` needs, in order of first appearance."""
        return torch.from_numpy(self.missing[self.needed])


class FeatureCache:
    """Feature rows by (node type, attr, global id), bounded by ``capacity_bytes`` of row storage.

    Args:
        capacity_bytes: bytes of row storage shared by all node types; the id maps add 4 bytes
            per node id and 8 per cached row (``index_bytes``).
        attrs: the (node type, attr) pairs to cache, e.g. the node attributes of the server's
            tensor schema; any objects with ``group_name``, ``attr_name``, ``dtype`` and
            ``shape`` do.
        policy: one of ``POLICY_NAMES`` (default ``static+sieve``).
        static_fraction: share of each slot given to the static tier by ``static+*`` policies.
        device: where rows are kept and returned (a CUDA device for a GPU-resident cache).
    """

    def __init__(
        self,
        capacity_bytes: int,
        attrs: Iterable[Any],
        *,
        policy: str = "static+sieve",
        static_fraction: float = 0.5,
        device: str | torch.device = "cpu",
    ) -> None:
        if policy not in POLICY_NAMES:
            raise InvalidRequestError(f"unknown cache policy {policy!r}; choose one of {POLICY_NAMES}")
        if capacity_bytes < 0 or not 0.0 <= static_fraction <= 1.0:
            raise InvalidRequestError(
                f"capacity_bytes must be >= 0 and static_fraction in [0, 1]; "
                f"got {capacity_bytes!r} and {static_fraction!r}"
            )
        groups: dict[Any, list[AttrSchema]] = {}
        for a in attrs:
            groups.setdefault(a.group_name, []).append(AttrSchema(a.group_name, a.attr_name, a.dtype, tuple(a.shape)))
        self.capacity_bytes, self.policy, self.device = int(capacity_bytes), policy, torch.device(device)
        sizes = {g: max(s.shape[0] for s in specs) for g, specs in groups.items()}
        total = sum(sizes[g] * sum(s.row_bytes for s in specs) for g, specs in groups.items())
        parts = policy.split("+")
        dynamic = EVICTION_POLICIES.get(parts[-1])
        static_share = 1.0 if dynamic is None else (static_fraction if STATIC in parts else 0.0)
        self._slots: dict[Any, CacheSlot] = {}
        for group, specs in groups.items():
            # Every node type caches the same fraction of its nodes; integer division keeps the
            # sum of the slots' bytes within capacity_bytes.
            rows = min(sizes[group], self.capacity_bytes * sizes[group] // total) if total else 0
            static_rows = int(rows * static_share)
            self._slots[group] = CacheSlot(specs, static_rows, rows - static_rows, dynamic, self.device)
        self.hits = self.misses = self.static_hits = self.dynamic_hits = 0
        self._epoch_start = CacheStats()
        self._lock = threading.Lock()
        logger.info(
            "feature cache: policy %s, %d of %d bytes of rows on %s",
            policy, self.nbytes, total, self.device,
        )

    @property
    def nbytes(self) -> int:
        """Bytes of row storage allocated (never more than ``capacity_bytes``)."""
        return sum(s.capacity * s.row_bytes for s in self._slots.values())

    @property
    def index_bytes(self) -> int:
        """Host bytes of the id maps."""
        return sum(s.id2pos.nbytes + s.pos2id.nbytes for s in self._slots.values())

    @property
    def miss_rate(self) -> float:
        """Misses over lookups since the cache was created."""
        return self.total().miss_rate

    def total(self) -> CacheStats:
        """Counters since the cache was created."""
        return CacheStats(self.hits, self.misses, self.static_hits, self.dynamic_hits)

    def start_epoch(self) -> CacheStats:
        """Start a new epoch window; return the window that just ended."""
        ended = self.stats()
        self._epoch_start = self.total()
        return ended

    def stats(self) -> CacheStats:
        """Counters of the current epoch (since the last ``start_epoch``)."""
        now, start = self.total(), self._epoch_start
        return CacheStats(
            now.hits - start.hits,
            now.misses - start.misses,
            now.static_hits - start.static_hits,
            now.dynamic_hits - start.dynamic_hits,
        )

    def locate(
        self,
        group_name: Any,
        attr_names: Sequence[str],
        ids: Tensor,
        *,
        into: Sequence[Tensor] | None = None,
        written: np.ndarray | None = None,
        sent: tuple[Tensor, Sequence[Tensor]] | None = None,
    ) -> CacheRead:
        """First half of a read: rows of ``ids`` (global) for each of ``attr_names``, hits copied.

        The returned ``CacheRead`` holds the rows, in request order with duplicates kept, and
        ``wanted``: the distinct ids (int64, CPU, in order of first appearance) whose rows the
        caller must bring to ``fill``, the second half.
        ``into`` (one CPU tensor per attr with a row per id, on a CPU cache) receives the rows
        instead of new tensors; ``written`` (a mask over ``ids``) says which of its rows already
        hold theirs, e.g. aligned rows from the server; those ids are not wanted.
        ``sent``: rows already here (distinct ids in order of first appearance in ``ids``, and
        per attr a row per id), e.g. delivered with the sample. When they hold the rows of
        every id the cache lacks, a CPU cache writes them and its hits in one pass
        (``merge_rows``) and nothing is wanted; else they are ignored.

        Raises:
            InvalidRequestError: negative ids, an ``into`` that does not match, or ``sent``
                rows of the wrong dtype or shape.
            NotFoundError: the node type or an attr is not cached.
        """
        slot = self._slot(group_name)
        specs = [slot.spec(name) for name in attr_names]
        ids = slot.check_ids(ids)
        if into is None:
            outs = [self._empty((ids.shape[0], *s.shape[1:]), getattr(torch, s.dtype)) for s in specs]
        else:
            outs = list(into)
            self._check_into(specs, ids.shape[0], outs)
        with self._lock:  # hits are copied before another thread can evict them
            where, missing = self._locate(slot, ids)
            merged = self._merge(slot, attr_names, outs, where, missing, sent) if written is None else False
            if not merged:
                hit_at = np.flatnonzero(where >= 0)
                hit_positions = where[hit_at]
                for name, out in zip(attr_names, outs):
                    self._move_rows(out, hit_at, slot.storage[name], hit_positions)
        needed = np.zeros(missing.shape[0], dtype=bool)
        if merged:
            return CacheRead(slot, list(attr_names), outs, where, missing, np.empty(0, np.int64), needed)
        miss_at = np.flatnonzero(where < 0)
        todo = miss_at if written is None else miss_at[~written[miss_at]]  # still without their row
        needed[-1 - where[todo]] = True
        return CacheRead(slot, list(attr_names), outs, where, missing, todo, needed)

    def fill(self, read: CacheRead, rows: Sequence[Tensor]) -> list[Tensor]:
        """Second half of a read: ``rows`` (per attr, a row per id of ``read.wanted``) go into
        the read's rows, which are returned. The missing rows are admitted to the dynamic tier
        when the read covers every cached attr of the node type.

        Raises:
            InvalidRequestError: rows of the wrong dtype or shape.
        """
        slot, where, missing = read.slot, read.where, read.missing
        if read.todo.size:
            wanted = missing[read.needed]
            fetched_row = (np.cumsum(read.needed) - 1)[-1 - where[read.todo]]
            for name, out, r in zip(read.attr_names, read.rows, rows, strict=True):
                r = slot.check_rows(name, wanted, r).to(self.device)
                self._move_rows(out, read.todo, r, fetched_row)
        if missing.size and slot.policy is not None and set(read.attr_names) == slot.storage.keys():
            miss_at = np.flatnonzero(where < 0)  # static: only warm() fills
            row_at = np.empty(missing.shape[0], dtype=np.int64)  # a position of each missing id
            row_at[-1 - where[miss_at]] = miss_at
            with self._lock:
                self._store(slot, missing, dict(zip(read.attr_names, read.rows)), row_at)
        return read.rows

    def read_group(
        self,
        group_name: Any,
        attr_names: Sequence[str],
        ids: Tensor,
        fetch_missing: FetchMissing,
        *,
        into: Sequence[Tensor] | None = None,
        written: np.ndarray | None = None,
    ) -> list[Tensor]:
        """``locate`` then ``fill`` in one call: ``fetch_missing`` gets the wanted ids (at most
        once, only when there are some) and returns their rows per attr."""
        read = self.locate(group_name, attr_names, ids, into=into, written=written)
        return self.fill(read, fetch_missing(read.wanted) if read.todo.size else [])

    def read(
        self, group_name: Any, attr_name: str, ids: Tensor, fetch_missing: Callable[[Tensor], Tensor]
    ) -> Tensor:
        """``read_group`` for one attr; ``fetch_missing`` returns that attr's rows."""
        return self.read_group(group_name, [attr_name], ids, lambda missing: [fetch_missing(missing)])[0]

    def lookup(self, group_name: Any, attr_name: str, ids: Tensor) -> tuple[Tensor, Tensor]:
        """Split ``ids`` (global) into hits and misses.

        Returns:
            ``(rows, hit_mask)``: ``hit_mask[i]`` says whether ``ids[i]`` is cached, and
            ``rows`` holds the rows of ``ids[hit_mask]`` in that order, on the cache's device.
        """
        slot = self._slot(group_name)
        slot.spec(attr_name)
        ids = slot.check_ids(ids)
        with self._lock:
            where, _ = self._locate(slot, ids)
            hit = where >= 0
            rows = slot.storage[attr_name].index_select(0, self._on_device(where[hit]))
        return rows, torch.from_numpy(hit)

    def insert(self, group_name: Any, ids: Tensor | np.ndarray, rows: Mapping[str, Tensor]) -> int:
        """Offer rows of ``ids`` (global; ``rows``: every cached attr) to the dynamic tier.

        Resident ids get their rows overwritten; new ids are admitted up to the tier's capacity
        (the rest are dropped, never waited for), evicting by the policy. Returns how many
        were stored.
        """
        slot = self._slot(group_name)
        ids = slot.check_ids(ids)
        rows = slot.check_all_rows(ids, rows)
        uniq, first = np.unique(ids, return_index=True)
        if uniq.shape[0] != ids.shape[0] or not (first == np.arange(first.shape[0])).all():
            rows = {name: r.index_select(0, torch.from_numpy(first).to(r.device)) for name, r in rows.items()}
        rows = {name: r.to(self.device) for name, r in rows.items()}
        with self._lock:
            return self._store(slot, uniq, rows)

    def warm(
        self, group_name: Any, ids: Tensor | np.ndarray, rows: Mapping[str, Tensor], *, ranking: str | None = None
    ) -> int:
        """Empty the slot and fill its static tier with ``ids`` (global, hottest first).

        ``rows`` holds every cached attr's rows of ``ids``. Ids beyond the static tier's
        capacity are dropped. Under a policy without a static tier the rows go to the dynamic
        tier instead. ``ranking``: the snapshot whose hot ranking ``ids`` lead, so that
        ``hot_prefix`` names them. Returns how many nodes were stored.
        """
        slot = self._slot(group_name)
        ids = slot.check_ids(ids)
        rows = slot.check_all_rows(ids, rows)
        with self._lock:
            slot.clear()
        if slot.static_rows == 0:
            return self.insert(group_name, ids, rows)
        _, first = np.unique(ids, return_index=True)
        keep = np.sort(first)[: slot.static_rows]  # distinct ids in the caller's order
        with self._lock:
            slot.ensure(int(ids[keep].max(initial=0)))
            positions = np.arange(keep.shape[0])
            slot.pos2id[positions] = ids[keep]
            slot.id2pos[ids[keep]] = positions
            for name, r in rows.items():
                slot.storage[name][: keep.shape[0]] = r[torch.from_numpy(keep)].to(self.device)
            apart = np.flatnonzero(keep != np.arange(keep.shape[0]))  # a repeated id ends the prefix
            prefix = int(apart[0]) if apart.size else int(keep.shape[0])
            slot.hot = HotPrefix(prefix, ranking) if ranking is not None and prefix else None
        logger.info("feature cache: warmed node type %r with %d nodes", group_name, keep.shape[0])
        return int(keep.shape[0])

    def known_ids(
        self, group_name: Any, *, include_static: bool = True, include_dynamic: bool = False, reads_ahead: int = 0
    ) -> Tensor:
        """Global ids (int64, in no particular order) held in the named tiers for ``group_name``.

        The sampling request sends these so the server leaves their rows out. The static tier
        never evicts. A dynamic row named in a request is evicted before its batch is read only
        when other batches are read in between (``reads_ahead``, e.g. a prefetcher's batches in
        flight), so the dynamic ids the policy would evict over that many reads (at the latest
        read's rate) are left out: they are cold, seldom in a batch, and then sent. A row
        evicted anyway is fetched in a second round trip, so rows stay exact.
        """
        slot = self._slots.get(group_name)
        if slot is None:
            return torch.empty(0, dtype=torch.long)
        lo = 0 if include_static else slot.static_rows
        hi = slot.capacity if include_dynamic else slot.static_rows
        with self._lock:
            held = slot.pos2id[lo:hi].copy()  # later admissions do not change it
            if include_dynamic and slot.policy is not None:
                held[slot.policy.next_victims(reads_ahead * slot.last_admitted) - lo] = -1
        return torch.from_numpy(held[held >= 0])

    def static_capacity(self, group_name: Any) -> int:
        """Nodes the static tier of ``group_name`` can hold."""
        slot = self._slots.get(group_name)
        return 0 if slot is None else slot.static_rows

    def hot_prefix(self, group_name: Any) -> HotPrefix | None:
        """The leading ids of the server's hot ranking that the static tier of ``group_name``
        holds (how many, and the ranking's snapshot), if it was warmed with a ``ranking``.

        A sampling request names this prefix instead of the ids; ``clear()`` forgets it.
        """
        slot = self._slots.get(group_name)
        return None if slot is None else slot.hot

    def groups(self) -> list[Any]:
        """The node types cached, in the order the attrs were given."""
        return list(self._slots)

    def attr_names(self, group_name: Any) -> list[str]:
        """The attrs of ``group_name`` cached."""
        return list(self._slot(group_name).specs)

    def clear(self) -> None:
        """Drop every cached row (e.g. after the server's feature version changed)."""
        with self._lock:
            for slot in self._slots.values():
                slot.clear()

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "_lock"}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def _store(
        self, slot: CacheSlot, uniq: np.ndarray, rows: dict[str, Tensor], row_of: np.ndarray | None = None
    ) -> int:
        """Write rows of distinct ids (every attr, on the device); hold the lock.

        The row of ``uniq[i]`` is ``rows[name][row_of[i]]`` (default: ``i``).
        """
        if not uniq.size:
            return 0
        row_of = np.arange(uniq.shape[0]) if row_of is None else row_of
        slot.ensure(int(uniq.max()))
        pos = slot.id2pos[uniq]
        at = np.flatnonzero(pos >= 0)
        for name, r in rows.items():  # resident (another thread stored it): refresh in place
            self._move_rows(slot.storage[name], pos[at], r, row_of[at])
        if slot.policy is None:
            return int(at.size)
        at_new = np.flatnonzero(pos < 0)[: slot.policy.capacity]
        new = uniq[at_new]
        slot.policy.admit(new, slot.id2pos, slot.pos2id)
        slot.last_admitted = int(new.shape[0])
        kept = slot.id2pos[new] >= 0  # in a full tier a late id may evict an early one
        for name, r in rows.items():
            self._move_rows(slot.storage[name], slot.id2pos[new[kept]], r, row_of[at_new[kept]])
        return int(at.size + kept.sum())

    def _locate(self, slot: CacheSlot, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``where`` and ``missing`` of the ``_locate`` kernel; counts and records the hits. Hold the lock."""
        if ids.size:
            slot.ensure(int(ids.max()))
        where, hit_positions, missing = _locate(ids, slot.id2pos, slot.pos2id)
        static = int(np.count_nonzero(hit_positions < slot.static_rows))
        self.hits += hit_positions.size
        self.misses += missing.size
        self.static_hits += static
        self.dynamic_hits += hit_positions.size - static
        if slot.policy is not None:
            dynamic = hit_positions[hit_positions >= slot.static_rows]
            if dynamic.size:
                slot.policy.touch(dynamic)
        return where, missing

    def _merge(
        self,
        slot: CacheSlot,
        attr_names: Sequence[str],
        outs: list[Tensor],
        where: np.ndarray,
        missing: np.ndarray,
        sent: tuple[Tensor, Sequence[Tensor]] | None,
    ) -> bool:
        """Write hits and ``sent`` rows into ``outs`` in one pass if ``sent`` holds the rows of
        every ``missing`` id and the rows live on the CPU; say whether it did. Hold the lock."""
        if sent is None or self.device.type != "cpu" or not slot.capacity:
            return False
        sent_ids, sent_rows = sent
        sent_ids = sent_ids.numpy()
        if not np.array_equal(sent_ids, missing):
            # Rows admitted since the request was made were sent too: fine, if every missing id was.
            row_of = _rows_in_order(missing, sent_ids)
            if row_of is None:
                return False
            where = where.copy()
            lacking = where < 0
            where[lacking] = -1 - row_of[-1 - where[lacking]]
        for name, out, rows in zip(attr_names, outs, sent_rows, strict=True):
            rows = slot.check_rows(name, sent_ids, rows)
            if out.numel():
                merge_rows(row_words(_row_bytes(out)), where, row_words(_row_bytes(slot.storage[name])),
                           row_words(_row_bytes(rows.contiguous())))
        return True

    def _check_into(self, specs: list[AttrSchema], num_ids: int, outs: list[Tensor]) -> None:
        for spec, out in zip(specs, outs, strict=True):
            shape = (num_ids, *spec.shape[1:])
            dtype = getattr(torch, spec.dtype)
            if out.dtype != dtype or tuple(out.shape) != shape or out.device != self.device:
                raise InvalidRequestError(
                    f"rows of node type {spec.group_name!r}, attr {spec.attr_name!r} cannot go into a "
                    f"{out.dtype} tensor of shape {list(out.shape)} on {out.device}; "
                    f"need {dtype}, {list(shape)} on {self.device}"
                )

    def _slot(self, group_name: Any) -> CacheSlot:
        slot = self._slots.get(group_name)
        if slot is None:
            raise NotFoundError(
                f"feature cache holds no node type {group_name!r} (has: {sorted(self._slots, key=repr)})"
            )
        return slot

    def _move_rows(self, dst: Tensor, dst_at: np.ndarray, src: Tensor, src_at: np.ndarray) -> None:
        """``dst[dst_at] = src[src_at]``: one pass on the CPU, two torch kernels on a GPU."""
        if not dst_at.size or not dst[0].numel():
            return
        if dst.is_cuda:
            dst.index_copy_(0, self._on_device(dst_at), src.index_select(0, self._on_device(src_at)))
        else:
            copy_rows(row_words(_row_bytes(dst)), dst_at, row_words(_row_bytes(src.contiguous())), src_at)

    def _empty(self, shape: tuple[int, ...], dtype: torch.dtype) -> Tensor:
        """A batch tensor on the cache's device; on the CPU from resident, recycled memory."""
        if self.device.type == "cpu":
            return BATCH_BUFFERS.empty(shape, dtype=dtype)
        return torch.empty(shape, dtype=dtype, device=self.device)

    def _on_device(self, positions: np.ndarray) -> Tensor:
        """Row positions as the int64 index torch's index kernels take (the cache keeps int32)."""
        return torch.from_numpy(positions).to(self.device, torch.int64)


def _row_bytes(rows: Tensor) -> np.ndarray:
    """A contiguous CPU tensor's rows as bytes (numpy lacks some of torch's dtypes)."""
    return rows.reshape(rows.shape[0], math.prod(rows.shape[1:])).view(torch.uint8).numpy()
