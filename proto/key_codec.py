"""External node keys (int or str, per node type) to and from their wire form."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gnnstore.common.errors import InvalidRequestError
from gnnstore.common.host_array import host_array

from . import idmap_pb2
from .codec import array_from_proto, array_to_proto

NodeKey = int | str

_INT_DTYPES = ("uint8", "int8", "int16", "int32", "int64")
MAX_KEY_BYTES = 1024
"""The longest str key (UTF-8 bytes) a request may name: keys are ids, not documents, and the id
map keeps every key twice (key to id and back)."""


def keys_to_proto(keys: Sequence[NodeKey] | np.ndarray) -> idmap_pb2.Keys:
    """Encode keys (a sequence, or an integer array or tensor): all ints as one int64 tensor,
    all strs as a list, a mix key by key.

    Raises:
        InvalidRequestError: a key that is neither int nor str (bools are refused too).
    """
    array = host_array(keys)
    if array is not None:
        if array.dtype.kind not in "iu" or array.ndim != 1:
            raise InvalidRequestError(
                f"key tensors must be 1-D integers, got {getattr(keys, 'dtype', array.dtype)} with shape "
                f"{list(array.shape)}"
            )
        return idmap_pb2.Keys(ints=array_to_proto(array.astype(np.int64, copy=False)))
    keys = list(keys)
    for key in keys:
        if isinstance(key, bool) or not isinstance(key, (int, str)):
            raise InvalidRequestError(f"a node key is an int or a str, got {key!r}")
    _check_lengths(keys)
    if all(isinstance(k, int) for k in keys):
        return idmap_pb2.Keys(ints=array_to_proto(np.array(keys, dtype=np.int64)))
    if all(isinstance(k, str) for k in keys):
        return idmap_pb2.Keys(strs=idmap_pb2.StringKeys(values=keys))
    mixed = [
        idmap_pb2.Key(str_key=k) if isinstance(k, str) else idmap_pb2.Key(int_key=k) for k in keys
    ]
    return idmap_pb2.Keys(mixed=idmap_pb2.MixedKeys(values=mixed))


def keys_from_proto(message: idmap_pb2.Keys) -> list[NodeKey] | np.ndarray:
    """Decode keys: an int64 array for all-int batches, else a list of int and str.

    Raises:
        InvalidRequestError: an int tensor that is not 1-D integers, or a str key over
            ``MAX_KEY_BYTES``.
    """
    kind = message.WhichOneof("kind")
    if kind == "ints":
        ints = array_from_proto(message.ints, "keys", words=True)
        if message.ints.dtype not in _INT_DTYPES or ints.ndim != 1:
            raise InvalidRequestError(f"int keys must be 1-D integers, got {message.ints.dtype}")
        return ints.astype(np.int64, copy=False)
    if kind == "strs":
        return _check_lengths(list(message.strs.values))
    if kind == "mixed":
        return _check_lengths([getattr(k, k.WhichOneof("value") or "int_key") for k in message.mixed.values])
    return []


def _check_lengths(keys: list[NodeKey]) -> list[NodeKey]:
    """``keys`` itself, if no str key is longer than ``MAX_KEY_BYTES``.

    Raises:
        InvalidRequestError: a longer key (named by its start and length).
    """
    for key in keys:
        if isinstance(key, str) and len(key) > MAX_KEY_BYTES // 4 and len(key.encode()) > MAX_KEY_BYTES:
            raise InvalidRequestError(
                f"node key {key[:32]!r}... is {len(key.encode()):,} bytes; keys are at most {MAX_KEY_BYTES:,} bytes"
            )
    return keys
