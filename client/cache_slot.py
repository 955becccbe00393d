"""One slot of the feature cache: the rows and id maps of one (node type, attr), and its checks."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from gnnstore.client.cache_policy import EvictionPolicy
from gnnstore.proto.errors import InvalidRequestError


@dataclass(frozen=True)
class CachedAttr:
    """One cached (node type, attr): its dtype and full shape ``[num_nodes, *row]``."""

    group_name: Any
    attr_name: str
    dtype: torch.dtype
    shape: tuple[int, ...]

    def __post_init__(self) -> None:
        dtype = getattr(torch, self.dtype) if isinstance(self.dtype, str) else self.dtype
        if not isinstance(dtype, torch.dtype) or len(self.shape) < 1:
            raise InvalidRequestError(
                f"cached attr ({self.group_name!r}, {self.attr_name!r}) needs a torch dtype and "
                f"a shape [num_nodes, *row]; got dtype={self.dtype!r} shape={self.shape!r}"
            )
        object.__setattr__(self, "dtype", dtype)
        object.__setattr__(self, "shape", tuple(int(s) for s in self.shape))

    @property
    def row_bytes(self) -> int:
        """Bytes of one row."""
        return int(np.prod(self.shape[1:], dtype=np.int64)) * self.dtype.itemsize


class CacheSlot:
    """Rows and maps of one (node type, attr): positions ``[0, static_rows)`` are the hot set."""

    def __init__(
        self,
        spec: CachedAttr,
        static_rows: int,
        dynamic_rows: int,
        policy: type[EvictionPolicy] | None,
        device: torch.device,
    ) -> None:
        self.spec, self.static_rows = spec, static_rows
        self.capacity = static_rows + dynamic_rows
        self.storage = torch.empty((self.capacity, *spec.shape[1:]), dtype=spec.dtype, device=device)
        self.policy = policy(static_rows, dynamic_rows) if policy and dynamic_rows else None
        self.id2pos = np.full(spec.shape[0], -1, dtype=np.int64)
        self.pos2id = np.full(self.capacity, -1, dtype=np.int64)
        self.warmed_prefix = 0  # the static tier holds the first this-many ids of the warm list

    def ensure(self, max_id: int) -> None:
        """Grow the id map to cover ``max_id`` (nodes added after the cache was built)."""
        if max_id >= self.id2pos.shape[0]:
            grown = np.full(max(max_id + 1, 2 * self.id2pos.shape[0]), -1, dtype=np.int64)
            grown[: self.id2pos.shape[0]] = self.id2pos
            self.id2pos = grown

    def clear(self) -> None:
        """Drop every row of both tiers."""
        self.id2pos.fill(-1)
        self.pos2id.fill(-1)
        self.warmed_prefix = 0
        if self.policy is not None:
            self.policy.clear()

    def check_ids(self, ids: Tensor | np.ndarray) -> np.ndarray:
        """``ids`` (global) as a flat int64 host array; int32/int64 only, none negative."""
        if isinstance(ids, Tensor):
            if ids.dtype not in (torch.int32, torch.int64):
                raise InvalidRequestError(
                    f"ids for ({self.spec.group_name!r}, {self.spec.attr_name!r}) must be int32 "
                    f"or int64; got {ids.dtype}"
                )
            ids = ids.detach().cpu().numpy()
        ids = np.asarray(ids).astype(np.int64, copy=False).reshape(-1)
        if ids.size and ids.min() < 0:
            raise InvalidRequestError(
                f"negative id {int(ids.min())} for node type {self.spec.group_name!r}, "
                f"attr {self.spec.attr_name!r}"
            )
        return ids

    def check_rows(self, ids: np.ndarray, rows: Tensor) -> Tensor:
        """``rows`` if they are this attr's dtype with one row per id of ``ids`` (global)."""
        want = (ids.shape[0], *self.spec.shape[1:])
        if not isinstance(rows, Tensor) or rows.dtype != self.spec.dtype or tuple(rows.shape) != want:
            got = (getattr(rows, "dtype", type(rows)), tuple(getattr(rows, "shape", ())))
            raise InvalidRequestError(
                f"rows for ({self.spec.group_name!r}, {self.spec.attr_name!r}) must be "
                f"{self.spec.dtype} of shape {want}; got {got[0]} of shape {got[1]}"
            )
        return rows
