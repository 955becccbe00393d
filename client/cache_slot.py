"""One slot of the feature cache: the rows of one node type's attrs, its id maps, and its checks."""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch
from torch import Tensor

from gnnstore.client.cache_policy import EvictionPolicy
from gnnstore.common.attr_schema import AttrSchema
from gnnstore.common.errors import InvalidRequestError, NotFoundError
from gnnstore.proto.feature_request import HotPrefix


class CacheSlot:
    """Rows and maps of one node type; positions ``[0, static_rows)`` are the hot set.

    Every cached attr of the node type keeps its row of an id at the same position, so one id
    lookup serves all of them and a node is cached for every attr or for none.
    """

    def __init__(
        self,
        specs: list[AttrSchema],
        static_rows: int,
        dynamic_rows: int,
        policy: type[EvictionPolicy] | None,
        device: torch.device,
    ) -> None:
        self.node_type = specs[0].group_name
        self.specs = {s.attr_name: s for s in specs}
        self.static_rows = static_rows
        self.capacity = static_rows + dynamic_rows
        self.storage = {
            s.attr_name: torch.empty((self.capacity, *s.shape[1:]), dtype=getattr(torch, s.dtype), device=device)
            for s in specs
        }
        self.policy = policy(static_rows, dynamic_rows) if policy and dynamic_rows else None
        # Positions are below the capacity: 4 bytes per node id of the graph halve the map
        # (and the cache lines a lookup touches) whenever they fit.
        self._position_dtype = np.int32 if self.capacity < np.iinfo(np.int32).max else np.int64
        self.id2pos = np.full(max(s.shape[0] for s in specs), -1, dtype=self._position_dtype)
        self.pos2id = np.full(self.capacity, -1, dtype=np.int64)
        self.hot: HotPrefix | None = None  # the leading ids of a hot ranking the static tier holds
        self.last_admitted = 0  # ids the dynamic tier admitted in the latest read

    @property
    def row_bytes(self) -> int:
        """Bytes of one node's rows over every cached attr."""
        return sum(s.row_bytes for s in self.specs.values())

    def spec(self, attr_name: str) -> AttrSchema:
        """The cached attr ``attr_name``.

        Raises:
            NotFoundError: it is not cached.
        """
        spec = self.specs.get(attr_name)
        if spec is None:
            raise NotFoundError(
                f"feature cache holds no attr {attr_name!r} of node type {self.node_type!r} "
                f"(has: {sorted(self.specs)})"
            )
        return spec

    def ensure(self, max_id: int) -> None:
        """Grow the id map to cover ``max_id`` (nodes added after the cache was built)."""
        if max_id >= self.id2pos.shape[0]:
            grown = np.full(max(max_id + 1, 2 * self.id2pos.shape[0]), -1, dtype=self._position_dtype)
            grown[: self.id2pos.shape[0]] = self.id2pos
            self.id2pos = grown

    def __getstate__(self) -> dict:
        # A copy's rows are its own. Pickled into a spawned loader worker, a tensor would go
        # through torch's shared memory, and two workers evicting into one storage through
        # their own id maps would read each other's rows: rows travel as plain bytes instead.
        state = self.__dict__.copy()
        state["storage"] = {
            name: (rows.cpu().contiguous().view(torch.uint8).numpy(), rows.dtype, tuple(rows.shape), rows.device)
            for name, rows in self.storage.items()
        }
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.storage = {
            name: torch.from_numpy(raw).view(dtype).reshape(shape).to(device)
            for name, (raw, dtype, shape, device) in state["storage"].items()
        }

    def clear(self) -> None:
        """Drop every row of both tiers."""
        self.id2pos.fill(-1)
        self.pos2id.fill(-1)
        self.hot, self.last_admitted = None, 0
        if self.policy is not None:
            self.policy.clear()

    def check_ids(self, ids: Tensor | np.ndarray) -> np.ndarray:
        """``ids`` (global) as a flat int64 host array; int32/int64 only, none negative."""
        if isinstance(ids, Tensor):
            if ids.dtype not in (torch.int32, torch.int64):
                raise InvalidRequestError(
                    f"ids for node type {self.node_type!r} must be int32 or int64; got {ids.dtype}"
                )
            ids = ids.detach().cpu().numpy()
        ids = np.asarray(ids).astype(np.int64, copy=False).reshape(-1)
        if ids.size and ids.min() < 0:
            raise InvalidRequestError(f"negative id {int(ids.min())} for node type {self.node_type!r}")
        return ids

    def check_rows(self, attr_name: str, ids: np.ndarray, rows: Tensor) -> Tensor:
        """``rows`` if they are ``attr_name``'s dtype with one row per id of ``ids`` (global)."""
        spec = self.spec(attr_name)
        want = (ids.shape[0], *spec.shape[1:])
        dtype = getattr(torch, spec.dtype)
        if not isinstance(rows, Tensor) or rows.dtype != dtype or tuple(rows.shape) != want:
            got = (getattr(rows, "dtype", type(rows)), tuple(getattr(rows, "shape", ())))
            raise InvalidRequestError(
                f"rows for ({self.node_type!r}, {attr_name!r}) must be {dtype} of shape "
                f"{want}; got {got[0]} of shape {got[1]}"
            )
        return rows

    def check_all_rows(self, ids: np.ndarray, rows: Mapping[str, Tensor]) -> dict[str, Tensor]:
        """``rows`` for every cached attr (attr name -> rows of ``ids``), each checked."""
        if set(rows) != set(self.specs):
            raise InvalidRequestError(
                f"rows for node type {self.node_type!r} must name every cached attr "
                f"{sorted(self.specs)}; got {sorted(rows)}"
            )
        return {name: self.check_rows(name, ids, rows[name]) for name in self.specs}
