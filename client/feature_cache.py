"""A byte-bounded cache of feature rows by (node type, attr, global id), in front of the server.

The cache is a decorator with the row source's ``read(ids)`` interface: ``read`` answers what it
holds and calls ``fetch_missing`` once with only the distinct missing ids. The byte budget is
shared by every (node type, attr) the cache is built with: each gets the same fraction of its
rows, so a budget of 20% of the feature bytes caches 20% of every attribute. A slot's rows live
in one tensor on ``device`` (a GPU for a CUDA-resident cache); ids, positions and the eviction
metadata live in numpy arrays on the host (one ``CacheSlot`` each, in ``cache_slot.py``), and
every step is a vectorised batch operation.

Policies, by name: ``static`` (a hot set given once by ``warm``, never evicted), ``lru`` and
``sieve`` (dynamic), and ``static+lru`` / ``static+sieve`` (both tiers; a hit in either is
one lookup, the static tier is filled by ``warm`` and the dynamic tier by misses).

Counters count distinct ids per call: ``hits``, ``misses``, ``static_hits``, ``dynamic_hits``
since creation, and per epoch through ``start_epoch()`` / ``stats()``.
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numba
import numpy as np
import torch
from torch import Tensor

from gnnstore.client.cache_policy import EVICTION_POLICIES
from gnnstore.client.cache_slot import CacheSlot, CachedAttr  # CachedAttr is imported from here too
from gnnstore.proto.errors import InvalidRequestError, NotFoundError

logger = logging.getLogger(__name__)

STATIC = "static"
POLICY_NAMES = (STATIC, *EVICTION_POLICIES, *(f"{STATIC}+{n}" for n in EVICTION_POLICIES))

FetchMissing = Callable[[Tensor], Tensor]


@numba.njit(cache=True, nogil=True)
def _copy_rows(dst: np.ndarray, dst_at: np.ndarray, src: np.ndarray, src_at: np.ndarray) -> None:
    """``dst[dst_at[i]] = src[src_at[i]]`` for every i, one pass over the bytes."""
    for i in range(dst_at.shape[0]):
        dst[dst_at[i], :] = src[src_at[i], :]


def _words(t: Tensor) -> np.ndarray:
    """A contiguous CPU tensor's rows as a 2-D array of the widest unsigned words that fit."""
    flat = t.reshape(t.shape[0], -1).view(torch.uint8).numpy()
    width = next(w for w in (8, 4, 2, 1) if flat.shape[1] % w == 0)
    return flat.view(f"u{width}")


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


class FeatureCache:
    """Feature rows by (node type, attr, global id), bounded by ``capacity_bytes`` of row storage.

    Args:
        capacity_bytes: bytes of row storage shared by all attrs; the id maps add 8 bytes per
            node id (``index_bytes``).
        attrs: the (node type, attr) pairs to cache, e.g. the server's tensor schema; any
            objects with ``group_name``, ``attr_name``, ``dtype`` and ``shape`` do.
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
        specs = [CachedAttr(a.group_name, a.attr_name, a.dtype, tuple(a.shape)) for a in attrs]
        self.capacity_bytes, self.policy, self.device = int(capacity_bytes), policy, torch.device(device)
        total = sum(s.shape[0] * s.row_bytes for s in specs)
        parts = policy.split("+")
        dynamic = EVICTION_POLICIES.get(parts[-1])
        static_share = 1.0 if dynamic is None else (static_fraction if STATIC in parts else 0.0)
        self._slots: dict[tuple[Any, str], CacheSlot] = {}
        for spec in specs:
            # Every slot caches the same fraction of its rows; integer division keeps the sum
            # of the slots' bytes within capacity_bytes.
            rows = min(spec.shape[0], self.capacity_bytes * spec.shape[0] // total) if total else 0
            static_rows = int(rows * static_share)
            self._slots[(spec.group_name, spec.attr_name)] = CacheSlot(
                spec, static_rows, rows - static_rows, dynamic, self.device
            )
        self.hits = self.misses = self.static_hits = self.dynamic_hits = 0
        self._memo: tuple[Tensor, int, tuple[np.ndarray, np.ndarray]] | None = None
        self._epoch_start = CacheStats()
        self._lock = threading.Lock()
        logger.info(
            "feature cache: policy %s, %d of %d bytes of rows on %s",
            policy, self.nbytes, total, self.device,
        )

    @property
    def nbytes(self) -> int:
        """Bytes of row storage allocated (never more than ``capacity_bytes``)."""
        return sum(s.capacity * s.spec.row_bytes for s in self._slots.values())

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

    def read(self, group_name: Any, attr_name: str, ids: Tensor, fetch_missing: FetchMissing) -> Tensor:
        """Rows of ``ids`` (global) in request order, duplicates kept, on the cache's device.

        ``fetch_missing`` is called at most once, with the distinct missing ids (int64, CPU,
        ascending), and must return their rows in that order.

        Raises:
            InvalidRequestError: negative ids, or fetched rows of the wrong dtype or shape.
            NotFoundError: the (node type, attr) is not cached.
        """
        slot = self._slot(group_name, attr_name)
        uniq, inverse = self._distinct(slot, ids)
        with self._lock:
            pos_u = self._find(slot, uniq)
            pos = pos_u[inverse]
            if (pos_u >= 0).all():
                return slot.storage.index_select(0, self._on_device(pos))
            out = torch.empty((pos.shape[0], *slot.spec.shape[1:]), dtype=slot.spec.dtype, device=self.device)
            at = np.flatnonzero(pos >= 0)
            self._move_rows(out, at, slot.storage, pos[at])
        miss_u = pos_u < 0
        missing = uniq[miss_u]
        rows = slot.check_rows(missing, fetch_missing(torch.from_numpy(missing))).to(self.device)
        at = np.flatnonzero(pos < 0)
        rank = np.cumsum(miss_u) - 1  # index of each distinct missing id in ``rows``
        self._move_rows(out, at, rows, rank[inverse[at]])
        with self._lock:
            self._store(slot, missing, rows)
        return out

    def lookup(self, group_name: Any, attr_name: str, ids: Tensor) -> tuple[Tensor, Tensor]:
        """Split ``ids`` (global) into hits and misses.

        Returns:
            ``(rows, hit_mask)``: ``hit_mask[i]`` says whether ``ids[i]`` is cached, and
            ``rows`` holds the rows of ``ids[hit_mask]`` in that order, on the cache's device.
        """
        slot = self._slot(group_name, attr_name)
        uniq, inverse = np.unique(slot.check_ids(ids), return_inverse=True)
        with self._lock:
            pos = self._find(slot, uniq)[inverse]
            hit = pos >= 0
            rows = slot.storage.index_select(0, self._on_device(pos[hit]))
        return rows, torch.from_numpy(hit)

    def insert(self, group_name: Any, attr_name: str, ids: Tensor | np.ndarray, rows: Tensor) -> int:
        """Offer rows of ``ids`` (global) to the dynamic tier; return how many were stored.

        Resident ids get their row overwritten; new ids are admitted up to the tier's capacity
        (the rest are dropped, never waited for), evicting by the policy.
        """
        slot = self._slot(group_name, attr_name)
        ids = slot.check_ids(ids)
        rows = slot.check_rows(ids, rows).to(self.device)
        uniq, first = np.unique(ids, return_index=True)
        if uniq.shape[0] != ids.shape[0] or not (first == np.arange(first.shape[0])).all():
            rows = rows.index_select(0, self._on_device(first))
        with self._lock:
            return self._store(slot, uniq, rows)

    def warm(self, group_name: Any, attr_name: str, ids: Tensor | np.ndarray, rows: Tensor) -> int:
        """Empty the slot and fill its static tier with ``ids`` (global, hottest first).

        Ids beyond the static tier's capacity are dropped. Under a policy without a static
        tier the rows go to the dynamic tier instead. Returns how many rows were stored.
        """
        slot = self._slot(group_name, attr_name)
        ids = slot.check_ids(ids)
        rows = slot.check_rows(ids, rows)
        with self._lock:
            slot.clear()
        if slot.static_rows == 0:
            return self.insert(group_name, attr_name, ids, rows)
        _, first = np.unique(ids, return_index=True)
        keep = np.sort(first)[: slot.static_rows]  # distinct ids in the caller's order
        with self._lock:
            slot.ensure(int(ids[keep].max(initial=0)))
            positions = np.arange(keep.shape[0])
            slot.pos2id[positions] = ids[keep]
            slot.id2pos[ids[keep]] = positions
            slot.storage[: keep.shape[0]] = rows[torch.from_numpy(keep)].to(self.device)
            apart = np.flatnonzero(keep != np.arange(keep.shape[0]))  # a repeated id ends the prefix
            slot.warmed_prefix = int(apart[0]) if apart.size else int(keep.shape[0])
        logger.info("feature cache: warmed (%r, %r) with %d rows", group_name, attr_name, keep.shape[0])
        return int(keep.shape[0])

    def known_ids(
        self, group_name: Any, *, include_static: bool = True, include_dynamic: bool = False
    ) -> Tensor:
        """Global ids (int64, ascending) held in the named tiers for every attr of ``group_name``.

        The sampling request sends these so the server leaves their rows out. The static tier
        never evicts. A dynamic row named in a request may be evicted before its batch is read
        only when other batches are read in between (features read in another process than
        the sampling); the exchange then fetches it in a second round trip, so rows stay exact.
        """
        with self._lock:
            held = None
            for (group, _), slot in self._slots.items():
                if group != group_name:
                    continue
                lo = 0 if include_static else slot.static_rows
                hi = slot.capacity if include_dynamic else slot.static_rows
                if held is None:
                    held = slot.pos2id[lo:hi]
                    held = held[held >= 0]
                else:
                    held = held[held < slot.id2pos.shape[0]]
                    pos = slot.id2pos[held]
                    held = held[(pos >= lo) & (pos < hi)]
        return torch.from_numpy(np.sort(held) if held is not None else np.empty(0, dtype=np.int64))

    def static_capacity(self, group_name: Any) -> int:
        """Rows the static tier of ``group_name``'s attrs can hold (the largest of its attrs)."""
        return max((s.static_rows for (g, _), s in self._slots.items() if g == group_name), default=0)

    def warmed_prefix(self, group_name: Any) -> int:
        """How many leading ids of the last ``warm`` lists every attr of ``group_name`` holds.

        A client warmed from the server's hot ranking sends this count instead of the ids; it
        drops to 0 after ``clear()``.
        """
        with self._lock:
            counts = [s.warmed_prefix for (g, _), s in self._slots.items() if g == group_name]
        return min(counts, default=0)

    def groups(self) -> list[Any]:
        """The node types cached, in the order the attrs were given."""
        return list(dict.fromkeys(g for g, _ in self._slots))

    def attr_names(self, group_name: Any) -> list[str]:
        """The attrs of ``group_name`` cached."""
        return [a for g, a in self._slots if g == group_name]

    def clear(self) -> None:
        """Drop every cached row (e.g. after the server's feature version changed)."""
        with self._lock:
            for slot in self._slots.values():
                slot.clear()

    def __getstate__(self) -> dict:
        return {k: (None if k == "_memo" else v) for k, v in self.__dict__.items() if k != "_lock"}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def _store(self, slot: CacheSlot, uniq: np.ndarray, rows: Tensor) -> int:
        """Write rows of distinct ascending ids (rows on the device, aligned); hold the lock."""
        if not uniq.size:
            return 0
        slot.ensure(int(uniq[-1]))
        pos = slot.id2pos[uniq]
        at = np.flatnonzero(pos >= 0)
        self._move_rows(slot.storage, pos[at], rows, at)  # resident: refresh the row in place
        if slot.policy is None:
            return int(at.size)
        at_new = np.flatnonzero(pos < 0)[: slot.policy.capacity]
        new = uniq[at_new]
        slot.policy.admit(new, slot.id2pos, slot.pos2id)
        kept = slot.id2pos[new] >= 0  # in a full tier a late id may evict an early one
        self._move_rows(slot.storage, slot.id2pos[new[kept]], rows, at_new[kept])
        return int(at.size + kept.sum())

    def _find(self, slot: CacheSlot, uniq: np.ndarray) -> np.ndarray:
        """Positions of distinct ascending ids (-1 for a miss); counts and records the hits."""
        if uniq.size:
            slot.ensure(int(uniq[-1]))
        pos = slot.id2pos[uniq]
        hit = pos >= 0
        static = int((pos[hit] < slot.static_rows).sum())
        self.hits += int(hit.sum())
        self.misses += int(uniq.shape[0] - hit.sum())
        self.static_hits += static
        self.dynamic_hits += int(hit.sum()) - static
        if slot.policy is not None:
            dyn = pos[pos >= slot.static_rows]
            if dyn.size:
                slot.policy.touch(dyn)
        return pos

    def _distinct(self, slot: CacheSlot, ids: Tensor | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``np.unique(ids, return_inverse=True)``, computed once for the attrs of one batch.

        A loader reads every attr of a node type with the same index tensor; it is recognised
        by identity and torch's in-place version counter, so an edited tensor is recomputed.
        """
        if not isinstance(ids, Tensor):
            return np.unique(slot.check_ids(ids), return_inverse=True)
        memo = self._memo
        if memo is not None and memo[0] is ids and memo[1] == ids._version:
            return memo[2]
        result = np.unique(slot.check_ids(ids), return_inverse=True)
        self._memo = (ids, ids._version, result)
        return result

    def _slot(self, group_name: Any, attr_name: str) -> CacheSlot:
        slot = self._slots.get((group_name, attr_name))
        if slot is None:
            raise NotFoundError(
                f"feature cache holds no attr {attr_name!r} of node type {group_name!r} "
                f"(has: {sorted(self._slots, key=repr)})"
            )
        return slot

    def _move_rows(self, dst: Tensor, dst_at: np.ndarray, src: Tensor, src_at: np.ndarray) -> None:
        """``dst[dst_at] = src[src_at]``: one pass on the CPU, two torch kernels on a GPU."""
        if not dst_at.size or not dst[0].numel():
            return
        if dst.is_cuda:
            dst.index_copy_(0, self._on_device(dst_at), src.index_select(0, self._on_device(src_at)))
        else:
            _copy_rows(_words(dst), dst_at, _words(src.contiguous()), src_at)

    def _on_device(self, array: np.ndarray) -> Tensor:
        return torch.from_numpy(array).to(self.device)
