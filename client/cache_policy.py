"""Eviction policies for the feature cache: LRU and SIEVE over a fixed range of row positions.

A policy owns the recency metadata of one tier of one cache slot: positions
``base .. base + capacity - 1`` of the slot's row storage. It never touches rows; it decides
which position a new id takes and which resident id leaves, and keeps the slot's two maps
consistent (``id2pos[id]`` is the id's position or -1; ``pos2id[pos]`` is the position's id or
-1). The loops run in numba over whole batches, so no Python loop runs per id.
"""
from __future__ import annotations

from typing import ClassVar

import numba
import numpy as np

_HEAD, _TAIL, _HAND, _SIZE = 0, 1, 2, 3


@numba.njit(cache=True, nogil=True)
def _unlink(p: int, newer: np.ndarray, older: np.ndarray, state: np.ndarray) -> None:
    n, o = newer[p], older[p]
    if n != -1:
        older[n] = o
    else:
        state[_HEAD] = o
    if o != -1:
        newer[o] = n
    else:
        state[_TAIL] = n


@numba.njit(cache=True, nogil=True)
def _push_head(p: int, newer: np.ndarray, older: np.ndarray, state: np.ndarray) -> None:
    h = state[_HEAD]
    newer[p] = -1
    older[p] = h
    if h != -1:
        newer[h] = p
    else:
        state[_TAIL] = p
    state[_HEAD] = p


@numba.njit(cache=True, nogil=True)
def _place(ids, id2pos, pos2id, base, p, i) -> None:  # noqa: ANN001 - numba kernel
    victim = pos2id[base + p]
    if victim != -1:
        id2pos[victim] = -1
    pos2id[base + p] = ids[i]
    id2pos[ids[i]] = base + p


@numba.njit(cache=True, nogil=True)
def _lru_admit(ids, id2pos, pos2id, base, newer, older, state) -> None:  # noqa: ANN001
    cap = newer.shape[0]
    for i in range(ids.shape[0]):
        if state[_SIZE] < cap:
            p = state[_SIZE]
            state[_SIZE] += 1
        else:
            p = state[_TAIL]
            _unlink(p, newer, older, state)
        _place(ids, id2pos, pos2id, base, p, i)
        _push_head(p, newer, older, state)


@numba.njit(cache=True, nogil=True)
def _lru_touch(positions, base, newer, older, state) -> None:  # noqa: ANN001
    for i in range(positions.shape[0]):
        p = positions[i] - base
        _unlink(p, newer, older, state)
        _push_head(p, newer, older, state)


@numba.njit(cache=True, nogil=True)
def _sieve_admit(ids, id2pos, pos2id, base, newer, older, state, visited) -> None:  # noqa: ANN001
    cap = newer.shape[0]
    for i in range(ids.shape[0]):
        if state[_SIZE] < cap:
            p = state[_SIZE]
            state[_SIZE] += 1
        else:
            q = state[_HAND] if state[_HAND] != -1 else state[_TAIL]
            while visited[q]:
                visited[q] = 0
                q = newer[q] if newer[q] != -1 else state[_TAIL]
            p = q
            state[_HAND] = newer[q]
            _unlink(p, newer, older, state)
        _place(ids, id2pos, pos2id, base, p, i)
        visited[p] = 0
        _push_head(p, newer, older, state)


@numba.njit(cache=True, nogil=True)
def _lru_victims(count, base, newer, state) -> np.ndarray:  # noqa: ANN001
    out = np.empty(count, dtype=np.int64)
    q, n = state[_TAIL], 0
    while n < count and q != -1:
        out[n] = base + q
        n += 1
        q = newer[q]
    return out[:n]


@numba.njit(cache=True, nogil=True)
def _sieve_victims(count, base, newer, state, visited) -> np.ndarray:  # noqa: ANN001
    """The hand's next ``count`` victims: unvisited entries in its order; past one full turn
    (every bit it passed is cleared by then) the entries it skipped, in the same order."""
    out = np.empty(count, dtype=np.int64)
    start = state[_HAND] if state[_HAND] != -1 else state[_TAIL]
    n = 0
    for second_turn in range(2):
        q = start
        while n < count and q != -1:
            if visited[q] == second_turn:
                out[n] = base + q
                n += 1
            q = newer[q] if newer[q] != -1 else state[_TAIL]
            if q == start:
                break
    return out[:n]


class EvictionPolicy:
    """Recency metadata of ``capacity`` positions starting at ``base``; subclasses pick victims."""

    name: ClassVar[str]

    def __init__(self, base: int, capacity: int) -> None:
        self.base, self.capacity = base, capacity
        self.clear()

    def clear(self) -> None:
        """Forget every entry (the caller clears its maps)."""
        self._newer = np.full(self.capacity, -1, dtype=np.int64)
        self._older = np.full(self.capacity, -1, dtype=np.int64)
        self._state = np.array([-1, -1, -1, 0], dtype=np.int64)  # head, tail, hand, size

    def touch(self, positions: np.ndarray) -> None:
        """Record hits on ``positions`` (absolute, int64, each in this tier)."""

    def admit(self, ids: np.ndarray, id2pos: np.ndarray, pos2id: np.ndarray) -> None:
        """Give each of ``ids`` (global, unique, not resident) a position, evicting as needed.

        With more ids than ``capacity``, later ids may evict earlier ones of the same call;
        afterwards ``id2pos`` says which stayed.
        """
        raise NotImplementedError

    def next_victims(self, admissions: int) -> np.ndarray:
        """Positions (absolute) whose ids the next ``admissions`` admissions would evict, if no
        hit came in between (a hit only keeps an entry longer)."""
        evicting = admissions - (self.capacity - int(self._state[_SIZE]))  # free positions go first
        return self._victims(max(0, min(evicting, self.capacity)))

    def _victims(self, count: int) -> np.ndarray:
        raise NotImplementedError


class LruPolicy(EvictionPolicy):
    """Least recently used: the baseline; a scan longer than the free space flushes it."""

    name = "lru"

    def touch(self, positions: np.ndarray) -> None:
        _lru_touch(positions, self.base, self._newer, self._older, self._state)

    def admit(self, ids: np.ndarray, id2pos: np.ndarray, pos2id: np.ndarray) -> None:
        _lru_admit(ids, id2pos, pos2id, self.base, self._newer, self._older, self._state)

    def _victims(self, count: int) -> np.ndarray:
        return _lru_victims(count, self.base, self._newer, self._state)


class SievePolicy(EvictionPolicy):
    """SIEVE (Zhang et al., NSDI'24): a FIFO with a visited bit and a hand; hits cost one store."""

    name = "sieve"

    def clear(self) -> None:
        super().clear()
        self._visited = np.zeros(self.capacity, dtype=np.uint8)

    def touch(self, positions: np.ndarray) -> None:
        self._visited[positions - self.base] = 1

    def admit(self, ids: np.ndarray, id2pos: np.ndarray, pos2id: np.ndarray) -> None:
        _sieve_admit(
            ids, id2pos, pos2id, self.base, self._newer, self._older, self._state, self._visited
        )

    def _victims(self, count: int) -> np.ndarray:
        return _sieve_victims(count, self.base, self._newer, self._state, self._visited)


EVICTION_POLICIES: dict[str, type[EvictionPolicy]] = {
    cls.name: cls for cls in (LruPolicy, SievePolicy)
}
