"""The snapshot's CSC ordered for temporal sampling, and the node times it was ordered by.

PyG's temporal neighbour sampling (``time_attr`` a node attribute) picks, for a node reached
from seed ``b``, only in-neighbours whose time is no later than ``b``'s seed time. With each
node's in-neighbours sorted by their time, those are a prefix of its list, found by a binary
search; ``TemporalIndex`` holds that order (a copy of each edge type's CSC, positions permuted)
and each position's source time, so a hop never reads the node-time array at random.
Edge types whose source type has no time are kept as they are and not filtered, as in PyG.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch_geometric.typing import EdgeType, NodeType

from gnnstore.backend.attr_index_cache import AttrIndexCache
from gnnstore.common.errors import InvalidRequestError, NotFoundError


@dataclass(frozen=True)
class TemporalRequest:
    """What one temporal sampling call needs: the index, PyG's ``seed_time`` (``None``: the
    seeds' own node times) and ``last`` (PyG's ``temporal_strategy='last'``, else 'uniform')."""

    index: "TemporalIndex"
    seed_time: Mapping[NodeType | None, object] | None
    last: bool


class TemporalIndex:
    """Per edge type ``(ptr, idx, eid, src_time)``, in-neighbours sorted by source time.

    Args:
        csc: edge type → ``(ptr, idx, eid)`` of the snapshot.
        ends: edge type → ``(source type, destination type)``.
        node_time: node type → one integer time per node (types without times: absent).
    """

    def __init__(
        self,
        csc: Mapping[EdgeType | None, tuple[np.ndarray, np.ndarray, np.ndarray]],
        ends: Mapping[EdgeType | None, tuple[NodeType | None, NodeType | None]],
        node_time: Mapping[NodeType | None, np.ndarray],
    ) -> None:
        self.node_time = dict(node_time)
        self.csc: dict[EdgeType | None, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]] = {}
        for edge_type, (ptr, idx, eid) in csc.items():
            time = self.node_time.get(ends[edge_type][0])
            if time is None:
                self.csc[edge_type] = (ptr, idx, eid, None)
                continue
            order = _by_destination_then_time(np.asarray(ptr), np.asarray(idx), time)
            self.csc[edge_type] = (ptr, idx[order], eid[order], time[idx[order]])

    def seed_times(self, seed: Mapping[NodeType | None, np.ndarray]) -> dict[NodeType | None, np.ndarray]:
        """Each seed's own node time, PyG's seed time when the caller gives none.

        Raises:
            InvalidRequestError: seeds of a node type without times.
        """
        out = {}
        for node_type, ids in seed.items():
            if not ids.shape[0]:
                continue
            if node_type not in self.node_time:
                raise InvalidRequestError(
                    f"temporal sampling: seeds of node type {node_type!r} have no time attribute; "
                    "give seed times (input_time / edge_label_time)"
                )
            out[node_type] = self.node_time[node_type][ids]
        return out


def _by_destination_then_time(ptr: np.ndarray, idx: np.ndarray, time: np.ndarray) -> np.ndarray:
    """The CSC positions ordered by destination, then by source time (ties: as stored).

    One stable sort of ``destination * N + rank of the source's time``: 1.8 s for 25M edges
    here, where ``np.lexsort`` of the two keys took 12 s.
    """
    rank = np.empty(time.shape[0], np.int64)
    rank[np.argsort(time, kind="stable")] = np.arange(time.shape[0])
    key = np.repeat(np.arange(ptr.shape[0] - 1, dtype=np.int64), np.diff(ptr)) * time.shape[0]
    key += rank[idx]
    return np.argsort(key, kind="stable")


def node_times(tensor: torch.Tensor, node_type: NodeType | None, time_attr: str) -> np.ndarray:
    """One int64 time per node from a stored ``[N]`` or ``[N, 1]`` integer attribute.

    Raises:
        InvalidRequestError: another shape or a non-integer dtype.
    """
    if tensor.dim() == 2 and tensor.size(1) == 1:
        tensor = tensor.view(-1)
    if tensor.dim() != 1 or not _is_integer(tensor.dtype):
        raise InvalidRequestError(
            f"time attribute {time_attr!r} of node type {node_type!r} must hold one integer per "
            f"node ([N] or [N, 1]), got {tensor.dtype} {list(tensor.shape)}"
        )
    return tensor.to(torch.int64).numpy()


def batch_times(
    seed_time: Mapping[NodeType | None, object], seeds: Mapping[NodeType | None, np.ndarray]
) -> np.ndarray:
    """The seed time of each subtree (seed index ``b`` of any type), from PyG's ``seed_time``.

    Raises:
        InvalidRequestError: times that are not integers, or not one per seed.
    """
    size = max((ids.shape[0] for ids in seeds.values()), default=0)
    out = np.zeros(size, np.int64)
    for node_type, times in seed_time.items():
        times = torch.as_tensor(times)
        ids = seeds.get(node_type)
        if ids is None:
            continue
        if not _is_integer(times.dtype) or times.dim() != 1 or times.numel() != ids.shape[0]:
            raise InvalidRequestError(
                f"seed times of node type {node_type!r} must be one integer per seed ({ids.shape[0]}), "
                f"got {times.dtype} {list(times.shape)}"
            )
        out[: ids.shape[0]] = times.to(torch.int64).numpy()
    return out


def _is_integer(dtype: torch.dtype) -> bool:
    return not (dtype.is_floating_point or dtype.is_complex or dtype == torch.bool)


class TemporalIndexes:
    """The temporal index of one time attribute at a time, built on first use from the stored
    node times and again when the feature store's version changes (a Put of new times).

    Args:
        engine: the snapshot's engine (``SamplingEngine``).
        feature_store: the durable feature store (``version()``, ``tensor_schema()``, ``get_tensor``).
    """

    def __init__(self, engine: Any, feature_store: Any) -> None:
        self._engine = engine
        self._features = feature_store
        self._cache = AttrIndexCache(
            lambda attr: engine.temporal_index(self._node_times(attr)), feature_store, "temporal index"
        )

    def get(self, time_attr: str) -> TemporalIndex:
        """The index sorted by ``time_attr``; building one takes a sort of every edge type.

        Raises:
            NotFoundError: no node type of the graph has ``time_attr``.
            InvalidRequestError: its values are not one integer per node.
        """
        return self._cache.get(time_attr)

    def _node_times(self, time_attr: str) -> dict[NodeType | None, np.ndarray]:
        graph_types = self._engine.snapshot.num_nodes
        groups = [s.group_name for s in self._features.tensor_schema()
                  if s.attr_name == time_attr and s.group_name in graph_types]
        if not groups:
            raise NotFoundError(f"no node type has a feature {time_attr!r} to sample by time")
        return {
            group: node_times(self._features.get_tensor(group_name=group, attr_name=time_attr, index=None),
                              group, time_attr)
            for group in groups
        }
