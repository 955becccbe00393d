"""``AttrSchema``: one stored feature attribute's node type, name, dtype and full shape.

The one record every room uses for it: the RocksDB store's ``tensor_schema()``, the wire's
``TensorSchema`` message, the client's ``RemoteFeatureStore.schema()`` and the feature cache's
slots.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from . import common_pb2
from .codec import attr_key_from_proto, attr_key_to_proto, dtype_from_name
from .errors import InvalidRequestError


@dataclass(frozen=True)
class AttrSchema:
    """Node type (``None`` when homogeneous), attr name, dtype and full shape ``[N, *row]``.

    ``dtype`` may be given by its name (``"float32"``); ``shape`` as any sequence of ints.

    Raises:
        InvalidRequestError: an unknown dtype or a shape without a node dimension.
    """

    group_name: Any
    attr_name: str
    dtype: torch.dtype
    shape: tuple[int, ...]

    def __post_init__(self) -> None:
        dtype = dtype_from_name(self.dtype) if isinstance(self.dtype, str) else self.dtype
        if not isinstance(dtype, torch.dtype) or len(self.shape) < 1:
            raise InvalidRequestError(
                f"attr ({self.group_name!r}, {self.attr_name!r}) needs a torch dtype and a shape "
                f"[num_nodes, *row]; got dtype={self.dtype!r} shape={self.shape!r}"
            )
        object.__setattr__(self, "dtype", dtype)
        object.__setattr__(self, "shape", tuple(int(s) for s in self.shape))

    @property
    def row_bytes(self) -> int:
        """Bytes of one node's row."""
        return math.prod(self.shape[1:]) * self.dtype.itemsize

    def to_proto(self) -> common_pb2.TensorSchema:
        """The wire ``TensorSchema`` (key, dtype name, shape)."""
        return common_pb2.TensorSchema(
            key=attr_key_to_proto(self.group_name, self.attr_name),
            dtype=str(self.dtype).removeprefix("torch."),
            shape=list(self.shape),
        )

    @classmethod
    def from_proto(cls, message: common_pb2.TensorSchema) -> AttrSchema:
        """Decode a wire ``TensorSchema``."""
        return cls(*attr_key_from_proto(message.key), dtype_from_name(message.dtype), tuple(message.shape))
