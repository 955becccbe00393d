"""External node keys (int or str, per node type) to and from their wire form."""
from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from gnnstore.common.errors import InvalidRequestError

from . import idmap_pb2
from .codec import tensor_from_proto, tensor_to_proto

NodeKey = int | str

MAX_KEY_BYTES = 1024
"""The longest str key (UTF-8 bytes) a request may name: keys are ids, not documents, and the id
map keeps every key twice (key to id and back)."""


def keys_to_proto(keys: Sequence[NodeKey] | Tensor) -> idmap_pb2.Keys:
    """Encode keys: all ints as one tensor, all strs as a list, a mix key by key.

    Raises:
        InvalidRequestError: a key that is neither int nor str (bools are refused too).
    """
    if isinstance(keys, Tensor):
        if keys.is_floating_point() or keys.dtype == torch.bool or keys.dim() != 1:
            raise InvalidRequestError(
                f"key tensors must be 1-D integers, got {keys.dtype} with shape {list(keys.shape)}"
            )
        return idmap_pb2.Keys(ints=tensor_to_proto(keys.long()))
    keys = list(keys)
    for key in keys:
        if isinstance(key, bool) or not isinstance(key, (int, str)):
            raise InvalidRequestError(f"a node key is an int or a str, got {key!r}")
    _check_lengths(keys)
    if all(isinstance(k, int) for k in keys):
        return idmap_pb2.Keys(ints=tensor_to_proto(torch.tensor(keys, dtype=torch.long)))
    if all(isinstance(k, str) for k in keys):
        return idmap_pb2.Keys(strs=idmap_pb2.StringKeys(values=keys))
    mixed = [
        idmap_pb2.Key(str_key=k) if isinstance(k, str) else idmap_pb2.Key(int_key=k) for k in keys
    ]
    return idmap_pb2.Keys(mixed=idmap_pb2.MixedKeys(values=mixed))


def keys_from_proto(message: idmap_pb2.Keys) -> list[NodeKey] | Tensor:
    """Decode keys: an int64 tensor for all-int batches, else a list of int and str.

    Raises:
        InvalidRequestError: an int tensor that is not 1-D integers, or a str key over
            ``MAX_KEY_BYTES``.
    """
    kind = message.WhichOneof("kind")
    if kind == "ints":
        ints = tensor_from_proto(message.ints, "keys")
        if ints.is_floating_point() or ints.is_complex() or ints.dtype == torch.bool or ints.dim() != 1:
            raise InvalidRequestError(f"int keys must be 1-D integers, got {message.ints.dtype}")
        return ints.long()
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
