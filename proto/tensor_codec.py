"""Torch tensors to and from their wire form, for the trainer's side (the server reads and writes
numpy arrays through ``codec.py``, without torch).

A decoded tensor is a new writable one, or with ``shared=`` a view of the reply segment's bytes
(``codec.py`` says how long those stay valid).
"""
from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

from gnnstore.common.dtypes import dtype_name
from gnnstore.common.errors import InvalidRequestError

from . import common_pb2 as pb
from .codec import checked_payload, encoded
from .reply_segment import ArrayWriter


def tensor_to_proto(tensor: Tensor, segment: ArrayWriter | None = None) -> pb.Tensor:
    """Encode a tensor (any device, any strides) as row-major little-endian bytes.

    With ``segment`` the bytes go to the reply segment when they fit there, else inline.

    Raises:
        InvalidRequestError: a dtype that cannot travel.
    """
    flat = tensor.detach().to("cpu").contiguous().reshape(-1)
    return encoded(flat.view(torch.uint8).numpy(), dtype_name(flat.dtype), tensor.shape, segment)


def tensor_from_proto(message: pb.Tensor, what: str = "tensor", shared: memoryview | None = None) -> Tensor:
    """Decode a tensor into a writable CPU tensor: a new one, or a view of ``shared``.

    Args:
        message: the wire tensor.
        what: names the field in error messages, e.g. ``"MultiGet index"``.
        shared: the bytes of the reply segment the request offered, if any.

    Raises:
        InvalidRequestError: as ``codec.checked_payload``.
    """
    name, shape, data = checked_payload(message, what, shared)
    dtype = getattr(torch, name)
    if math.prod(shape) == 0:
        return torch.empty(shape, dtype=dtype)
    if isinstance(data, np.ndarray):
        return torch.from_numpy(data).view(dtype).reshape(shape)
    return torch.frombuffer(bytearray(data), dtype=dtype).reshape(shape)


def ids_from_proto(message: pb.Tensor, what: str = "ids", shared: memoryview | None = None) -> Tensor:
    """Decode a 1-D integer id tensor (int32 or int64 on the wire) as an int64 tensor (new, or
    a view of ``shared`` for int64 ids there).

    Raises:
        InvalidRequestError: not integer, or not 1-D.
    """
    name, shape, data = checked_payload(message, what, shared)
    if name not in ("int32", "int64"):
        raise InvalidRequestError(f"{what} must be int64 or int32 ids, got dtype {message.dtype}")
    if len(shape) != 1:
        raise InvalidRequestError(f"{what} must be 1-D, got shape {list(shape)}")
    if name == "int32":  # widening makes the one copy a writable tensor needs
        return torch.from_numpy(np.frombuffer(data, dtype="<i4").astype(np.int64))
    return tensor_from_proto(message, what, shared)


def optional_tensor_to_proto(tensor: Tensor | None) -> pb.OptionalTensor:
    """Encode a tensor, or PyG's ``None``."""
    if tensor is None:
        return pb.OptionalTensor(is_none=True)
    return pb.OptionalTensor(value=tensor_to_proto(tensor))


def optional_tensor_from_proto(message: pb.OptionalTensor, what: str = "tensor") -> Tensor | None:
    """Decode a tensor or PyG's ``None``."""
    return None if message.is_none else tensor_from_proto(message.value, what)
