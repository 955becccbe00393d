"""Persistent map between users' node keys (int or str) and dense global ids, per node type.

Layout (raw-mode rocksdict, integers big-endian):

* ``b"\\x00t" + json(node_type)`` -> json ``{slot, n, identity}``: the type's key-space slot,
  its node count and the length of its identity prefix (see ``IdMap.identity``);
* ``b"\\x01" + slot (4) + encoded key`` -> the global id (8 bytes);
* ``b"\\x02" + slot (4) + global id (8)`` -> the encoded key.

A key is encoded as ``b"i"`` + the int64 in offset binary (so byte order is numeric order) or
``b"s"`` + its UTF-8 bytes: the int ``5`` and the str ``"5"`` are different keys.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from pathlib import Path

import numpy as np
from rocksdict import WriteBatch

from gnnstore.common.errors import InvalidRequestError, NotFoundError, PreconditionError, ResourceExhaustedError
from gnnstore.common.graph_types import NodeType, checked_node_type
from gnnstore.common.host_array import host_array
from gnnstore.stores.rocks_db import RocksDBHandle, disk_full_as_error, open_rdict, scan_prefix

logger = logging.getLogger(__name__)

_REOPEN_FREE_BYTES = 1 << 20
"""Free bytes needed to reopen the map after a write found the disk full (RocksDB writes a
manifest, options and log files as it opens)."""

NodeKey = int | str

_TYPE = b"\x00t"
_NEXT_SLOT = b"\x00n"
_FWD = b"\x01"
_REV = b"\x02"
_SIGN = np.uint64(1 << 63)
_INT_FWD = np.dtype([("p", "u1"), ("slot", ">u4"), ("tag", "u1"), ("key", ">u8")])
_REV_KEY = np.dtype([("p", "u1"), ("slot", ">u4"), ("id", ">u8")])
_INT_VALUE = np.dtype([("tag", "u1"), ("key", ">u8")])
_MAX_SHOWN = 5


class _TypeInfo:
    """One node type's record: where its keys live, how many nodes, identity prefix length."""

    def __init__(self, slot: int, n: int = 0, identity: int = 0) -> None:
        self.slot, self.n, self.identity = slot, n, identity

    def to_json(self) -> bytes:
        return json.dumps({"slot": self.slot, "n": self.n, "identity": self.identity}).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> "_TypeInfo":
        d = json.loads(raw)
        return cls(int(d["slot"]), int(d["n"]), int(d["identity"]))


class IdMap(RocksDBHandle):
    """External node key (int or str) <-> dense global id ``0 .. N_t-1``, per node type.

    An id, once given, never changes. ``None`` is the node type of a homogeneous graph.

    Args:
        path: the RocksDB directory (created when missing unless ``read_only``).
        read_only: open without the write lock; ``map_keys`` and ``identity`` then raise
            ``PreconditionError``.
        follow: read-only, following another process's writes (``catch_up``).
    """

    def __init__(self, path: str | os.PathLike, *, read_only: bool = False, follow: bool = False) -> None:
        self.path = Path(path)
        self.read_only = read_only or follow
        self._db = open_rdict(self.path, read_only=self.read_only, what="id map", follow=follow)
        self._failed_write = False  # RocksDB refuses every write after one failed, until reopened
        self._types: dict[NodeType | None, _TypeInfo] = {}
        self._caught_up()

    def _caught_up(self) -> None:
        types = {
            json.loads(key[len(_TYPE):]): _TypeInfo.from_json(value)
            for key, value in scan_prefix(self._db, _TYPE)
        }
        self._types = dict(sorted(types.items(), key=lambda kv: kv[1].slot))

    def __repr__(self) -> str:
        return f"IdMap({str(self.path)!r})"

    # ---- queries ---------------------------------------------------------------------------

    def node_types(self) -> list[NodeType | None]:
        """Every node type that has at least been declared, in first-mapped order."""
        return list(self._types)

    def num_nodes(self, node_type: NodeType | None) -> int:
        """Number of ids given to ``node_type`` (its ids are ``0 .. num_nodes-1``).

        Raises:
            NotFoundError: ``node_type`` has no keys.
        """
        return self._info(node_type).n

    def to_ids(self, node_type: NodeType | None, keys: Iterable[NodeKey] | np.ndarray) -> np.ndarray:
        """Global ids of known ``keys``, in order (duplicates kept).

        Raises:
            NotFoundError: an unknown node type or key (the message lists the first missing).
            InvalidRequestError: a key that is neither int nor str, or keys given as a dict or set.
        """
        info = self._info(node_type)
        ids, missing = self._lookup(info, _KeyBatch.of(keys, node_type))
        if missing.size:
            shown = [repr(k) for k in missing[:_MAX_SHOWN].tolist()]
            raise NotFoundError(
                f"node type {node_type!r} has no key(s) {', '.join(shown)}"
                f"{' ...' if missing.size > _MAX_SHOWN else ''} ({missing.size} unknown of "
                f"{len(ids)}; map them first with map_keys)"
            )
        return ids

    def lookup(self, node_type: NodeType | None, keys: Iterable[NodeKey] | np.ndarray) -> np.ndarray:
        """Global id of each key in order, ``-1`` for a key the map does not know; never writes.

        One multi-get for the keys outside the identity prefix. A node type the map has never
        seen knows no key, so every id is ``-1`` (unlike ``to_ids``, which raises).

        Raises:
            InvalidRequestError: a key that is neither int nor str, or keys given as a dict or set.
        """
        batch = _KeyBatch.of(keys, node_type)
        info = self._types.get(node_type)
        if info is None:
            return np.full(len(batch), -1, dtype=np.int64)
        ids, _ = self._lookup(info, batch, positions=True)
        return ids

    def to_keys(self, node_type: NodeType | None, ids: Sequence[int] | np.ndarray) -> list[NodeKey]:
        """External keys of global ``ids``, in order.

        Raises:
            NotFoundError: an unknown node type.
            InvalidRequestError: an id outside ``0 .. num_nodes-1``.
        """
        info = self._info(node_type)
        arr = _as_ids(ids, node_type)
        if arr.size and (arr.min() < 0 or arr.max() >= info.n):
            bad = int(arr.min() if arr.min() < 0 else arr.max())
            raise InvalidRequestError(
                f"node type {node_type!r}: id {bad} is out of range (valid ids: 0..{info.n - 1})"
            )
        keys: list[NodeKey] = arr.tolist()
        stored = np.flatnonzero(arr >= info.identity)
        if stored.size:
            for pos, value in zip(stored.tolist(), self._db[_rev_keys(info.slot, arr[stored])]):
                keys[pos] = _decode(value)
        return keys

    # ---- writes ----------------------------------------------------------------------------

    def map_keys(self, node_type: NodeType | None, keys: Iterable[NodeKey] | np.ndarray) -> np.ndarray:
        """Global ids of ``keys``; unseen keys get the next dense ids in first-seen order.

        One WriteBatch holds the new keys (both directions) and the new count, so a failure
        leaves the map as it was. Duplicates inside one call get one id.

        Raises:
            InvalidRequestError: a key that is neither int nor str, keys given as a dict or set
                (no order to give ids in), or a bad node type.
        """
        self._check_writable()
        checked_node_type(node_type)
        batch = _KeyBatch.of(keys, node_type)
        wb = WriteBatch(raw_mode=True)
        info = self._types.get(node_type) or _TypeInfo(self._next_slot(wb))
        ids, missing_pos = self._lookup(info, batch, positions=True)
        if missing_pos.size == 0 and node_type in self._types:
            return ids
        new_info = _TypeInfo(info.slot, info.n, info.identity)
        if missing_pos.size:
            uniq, first, inverse = batch.unique(missing_pos)
            order = np.argsort(first, kind="stable")
            rank = np.empty_like(order)
            rank[order] = np.arange(order.size)
            new_ids = info.n + rank
            ids[missing_pos] = new_ids[inverse]
            fwd, enc = uniq.forward_keys(info.slot), uniq.encoded()
            id_bytes = new_ids.astype(">u8").view("V8").tolist()
            for f, r, e, i in zip(fwd, _rev_keys(info.slot, new_ids), enc, id_bytes):
                wb.put(f, i)
                wb.put(r, e)
            new_info.n += int(new_ids.size)
        wb.put(_type_key(node_type), new_info.to_json())
        self._write(wb)
        self._types[node_type] = new_info
        logger.info("id map %r: %d new ids (now %d)", node_type, new_info.n - info.n, new_info.n)
        return ids

    def identity(self, node_type: NodeType | None, n: int) -> None:
        """Declare that ``node_type``'s keys ``0 .. n-1`` (ints) have ids equal to themselves.

        The fast path for ingesting a graph whose node keys are already dense ids: nothing is
        written per key. The map stays exact: later ``map_keys`` calls give other keys ids from
        ``n`` on, and ``to_keys(i)`` is the int ``i`` for ``i < n``. Calling it again with a
        larger ``n`` extends the prefix while no other key has been mapped.

        Raises:
            InvalidRequestError: ``n`` is negative, or the type already has keys outside an
                identity prefix.
        """
        self._check_writable()
        checked_node_type(node_type)
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise InvalidRequestError(f"node type {node_type!r}: identity size must be an int >= 0, got {n!r}")
        wb = WriteBatch(raw_mode=True)
        info = self._types.get(node_type) or _TypeInfo(self._next_slot(wb))
        if info.n != info.identity:
            raise InvalidRequestError(
                f"node type {node_type!r} already has {info.n - info.identity} mapped key(s) "
                "beyond an identity prefix; map further keys with map_keys"
            )
        new_info = _TypeInfo(info.slot, max(info.n, int(n)), max(info.identity, int(n)))
        wb.put(_type_key(node_type), new_info.to_json())
        self._write(wb)
        self._types[node_type] = new_info

    # ---- internals -------------------------------------------------------------------------

    def _info(self, node_type: NodeType | None) -> _TypeInfo:
        info = self._types.get(node_type)
        if info is None:
            raise NotFoundError(
                f"id map has no node type {node_type!r} (has: {self.node_types()})"
            )
        return info

    def _check_writable(self) -> None:
        """Refuse writes to a read-only map; reopen one whose last write failed for want of space.

        Raises:
            PreconditionError: the map is read-only.
            ResourceExhaustedError: it cannot be reopened yet (the disk is still full).
        """
        if self.read_only:
            raise PreconditionError(f"id map {self.path} is open read-only")
        if self._failed_write:
            if shutil.disk_usage(self.path).free < _REOPEN_FREE_BYTES:  # the open itself writes files
                raise ResourceExhaustedError("no space left on the disk for the id map's new keys; nothing was written")
            try:
                self._db.close()
            except Exception as exc:  # noqa: BLE001 - its flush repeats the failed write's error; the WAL holds the rest
                logger.info("closing the id map after its failed write: %s", exc)
            self._db = open_rdict(self.path, read_only=False, what="id map")
            self._failed_write = False
            logger.info("id map reopened after a write that found the disk full")

    def _write(self, wb: WriteBatch) -> None:
        """Write ``wb``; a full disk raises ``ResourceExhaustedError`` and the next write reopens the map."""
        try:
            with disk_full_as_error("id map's new keys"):
                self._db.write(wb)
        except ResourceExhaustedError:
            self._failed_write = True
            raise

    def _next_slot(self, wb: WriteBatch) -> int:
        raw = self._db.get(_NEXT_SLOT)
        slot = 0 if raw is None else int.from_bytes(raw, "big")
        wb.put(_NEXT_SLOT, (slot + 1).to_bytes(4, "big"))
        return slot

    def _lookup(
        self, info: _TypeInfo, batch: "_KeyBatch", *, positions: bool = False
    ) -> tuple[np.ndarray, np.ndarray]:
        """Ids of ``batch`` (-1 where unknown) and the missing keys (or their positions)."""
        ids = np.full(len(batch), -1, dtype=np.int64)
        in_prefix = batch.identity_mask(info.identity)
        ids[in_prefix] = batch.int_values(in_prefix)
        rest = np.flatnonzero(~in_prefix)
        if rest.size and info.n > info.identity:  # else no key is stored: skip the multi-get
            found = self._db[batch.take(rest).forward_keys(info.slot)]
            hit = np.fromiter((v is not None for v in found), dtype=bool, count=rest.size)
            if hit.any():
                raw = b"".join(v for v in found if v is not None)
                ids[rest[hit]] = np.frombuffer(raw, dtype=">u8").astype(np.int64)
        missing = np.flatnonzero(ids < 0)
        return ids, missing if positions else batch.take(missing).as_array()


class _KeyBatch:
    """A batch of keys: an int64 array (fast path) or a list of mixed int/str keys."""

    def __init__(self, ints: np.ndarray | None, items: list[NodeKey] | None) -> None:
        self.ints, self.items = ints, items

    @classmethod
    def of(cls, keys: object, node_type: NodeType | None) -> "_KeyBatch":
        keys = host_array(keys) if hasattr(keys, "__array__") else keys  # a tensor's keys as numpy
        if isinstance(keys, np.ndarray):
            if keys.ndim != 1 or keys.dtype.kind not in "iuUO" and keys.size:
                raise InvalidRequestError(
                    f"node type {node_type!r}: keys must be a 1-D sequence of int or str, got an "
                    f"array of {keys.dtype} with shape {list(keys.shape)}"
                )
            if keys.dtype.kind in "iu" or keys.size == 0:
                if keys.dtype == np.uint64 and keys.size and keys.max() > np.iinfo(np.int64).max:
                    raise InvalidRequestError(
                        f"node type {node_type!r}: int key {int(keys.max())} does not fit in int64"
                    )
                return cls(keys.astype(np.int64), None)
            keys = keys.tolist()
        if isinstance(keys, (Mapping, AbstractSet)):
            raise InvalidRequestError(
                f"node type {node_type!r}: keys must be a sequence of int or str, got a "
                f"{type(keys).__name__}; pass a list (e.g. list(d) for a dict's keys, "
                "list(d.values()) for its values)"
            )
        if isinstance(keys, (str, bytes)) or not isinstance(keys, Iterable):
            raise InvalidRequestError(
                f"node type {node_type!r}: keys must be a sequence of int or str, got "
                f"{type(keys).__name__}"
            )
        items = list(keys)
        if all(type(k) is int for k in items):
            try:
                return cls(np.asarray(items, dtype=np.int64), None)
            except OverflowError as exc:
                bad = next(k for k in items if not -(1 << 63) <= k < (1 << 63))
                raise InvalidRequestError(
                    f"node type {node_type!r}: int key {bad} does not fit in int64"
                ) from exc
        for pos, key in enumerate(items):
            if isinstance(key, np.integer):
                items[pos] = key = int(key)
            if isinstance(key, bool) or not isinstance(key, (int, str)):
                raise InvalidRequestError(
                    f"node type {node_type!r}: key #{pos} is {key!r} of type {type(key).__name__}; "
                    "keys must be int or str"
                )
            if isinstance(key, int) and not -(1 << 63) <= key < (1 << 63):
                raise InvalidRequestError(f"node type {node_type!r}: int key {key} does not fit in int64")
        return cls(None, items)

    def __len__(self) -> int:
        return len(self.ints) if self.ints is not None else len(self.items)

    def take(self, pos: np.ndarray) -> "_KeyBatch":
        if self.ints is not None:
            return _KeyBatch(self.ints[pos], None)
        return _KeyBatch(None, [self.items[p] for p in pos.tolist()])

    def as_array(self) -> np.ndarray:
        return self.ints if self.ints is not None else np.asarray(self.items, dtype=object)

    def identity_mask(self, identity: int) -> np.ndarray:
        if self.ints is not None:
            return (self.ints >= 0) & (self.ints < identity)
        return np.fromiter(
            (type(k) is int and 0 <= k < identity for k in self.items), dtype=bool, count=len(self.items)
        )

    def int_values(self, mask: np.ndarray) -> np.ndarray:
        if self.ints is not None:
            return self.ints[mask]
        return np.asarray([self.items[p] for p in np.flatnonzero(mask).tolist()], dtype=np.int64)

    def unique(self, pos: np.ndarray) -> tuple["_KeyBatch", np.ndarray, np.ndarray]:
        """Distinct keys among ``pos``, the position of each one's first use, and the inverse."""
        if self.ints is not None:
            uniq, first, inverse = np.unique(self.ints[pos], return_index=True, return_inverse=True)
            return _KeyBatch(uniq, None), first, inverse.reshape(-1)
        seen: dict[tuple[type, NodeKey], int] = {}
        inverse = np.empty(pos.size, dtype=np.int64)
        for i, p in enumerate(pos.tolist()):
            key = self.items[p]
            inverse[i] = seen.setdefault((type(key), key), len(seen))
        uniq = [key for _, key in seen]
        return _KeyBatch(None, uniq), np.arange(len(uniq)), inverse

    def encoded(self) -> list[bytes]:
        if self.ints is not None:
            enc = np.empty(len(self.ints), _INT_VALUE)
            enc["tag"], enc["key"] = ord("i"), self.ints.view(np.uint64) ^ _SIGN
            return enc.view("V9").tolist()
        return [_encode(k) for k in self.items]

    def forward_keys(self, slot: int) -> list[bytes]:
        if self.ints is not None:
            keys = np.empty(len(self.ints), _INT_FWD)
            keys["p"], keys["slot"], keys["tag"] = _FWD[0], slot, ord("i")
            keys["key"] = self.ints.view(np.uint64) ^ _SIGN
            return keys.view("V14").tolist()
        prefix = _FWD + slot.to_bytes(4, "big")
        return [prefix + _encode(k) for k in self.items]


def _type_key(node_type: NodeType | None) -> bytes:
    return _TYPE + json.dumps(node_type).encode()


def _rev_keys(slot: int, ids: np.ndarray) -> list[bytes]:
    """The reverse-map keys (``_REV`` + slot + global id) of ``ids``."""
    rev = np.empty(len(ids), _REV_KEY)
    rev["p"], rev["slot"], rev["id"] = _REV[0], slot, ids
    return rev.view("V13").tolist()


def _encode(key: NodeKey) -> bytes:
    if isinstance(key, str):
        return b"s" + key.encode("utf-8")
    return b"i" + ((key + (1 << 63)) & ((1 << 64) - 1)).to_bytes(8, "big")


def _decode(raw: bytes) -> NodeKey:
    if raw[:1] == b"s":
        return raw[1:].decode("utf-8")
    return int.from_bytes(raw[1:], "big") - (1 << 63)


def _as_ids(ids: object, node_type: NodeType | None) -> np.ndarray:
    arr = host_array(ids)
    arr = np.asarray(ids) if arr is None else arr
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
        raise InvalidRequestError(
            f"node type {node_type!r}: ids must be a 1-D integer sequence of global ids, got "
            f"{arr.dtype} with shape {list(arr.shape)}"
        )
    return arr.astype(np.int64, copy=False)


