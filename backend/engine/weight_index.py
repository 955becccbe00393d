"""Edge weights in the snapshot's CSC order, for weighted neighbour sampling.

PyG's ``NeighborSampler(weight_attr=...)`` picks a node's neighbours with probabilities
proportional to the weights of the edges to them. The weights are an edge attribute in the
feature store, a row per edge id; ``WeightIndex`` holds them per edge type in the order of the
snapshot's CSC (``weights[e_id[p]]`` at position ``p``) as running sums per node, so a pick is
a binary search of one node's sums. Edge types without the attribute are sampled uniformly.
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from gnnstore.backend.engine import sampling_kernels as kernels
from gnnstore.backend.engine.attr_index_cache import AttrIndexCache
from gnnstore.common.errors import InvalidRequestError, NotFoundError
from gnnstore.common.graph_types import EdgeType, edge_group_of
from gnnstore.common.host_array import host_array


class WeightIndex:
    """Per edge type what weighted picks read (``None``: the type is sampled uniformly): each
    CSC position's running sum of its node's weights, and per node the total, the largest
    weight and the count of positive ones (``sampling_kernels.weight_summary``).

    Args:
        csc: edge type → the snapshot's ``(ptr, idx, eid)``.
        weights: edge type → one finite, non-negative weight per edge id.
    """

    def __init__(
        self,
        csc: Mapping[EdgeType | None, tuple[np.ndarray, np.ndarray, np.ndarray]],
        weights: Mapping[EdgeType | None, np.ndarray],
    ) -> None:
        self.csc_weights: dict[EdgeType | None, tuple | None] = {}
        for edge_type, (ptr, _, eid) in csc.items():
            if edge_type not in weights:
                self.csc_weights[edge_type] = None
                continue
            cum, *summary = kernels.weight_summary(np.asarray(ptr), weights[edge_type][np.asarray(eid)])
            self.csc_weights[edge_type] = (cum, tuple(summary))


def edge_weights(values: object, edge_type: EdgeType | None, weight_attr: str, num_edge_ids: int) -> np.ndarray:
    """One float64 weight per edge id from a stored ``[E]`` or ``[E, 1]`` numeric attribute.

    Raises:
        InvalidRequestError: another shape or row count, a non-numeric dtype, or a weight that
            is negative, infinite or NaN (named by its edge id).
    """
    where = f"weight attribute {weight_attr!r} of edge type {edge_type!r}"
    array = host_array(values)
    if array is not None and array.ndim == 2 and array.shape[1] == 1:
        array = array.reshape(-1)
    if array is None or array.ndim != 1 or array.dtype.kind not in "iuf":
        got = type(values).__name__ if array is None else f"{array.dtype} {list(array.shape)}"
        raise InvalidRequestError(f"{where} must hold one number per edge ([E] or [E, 1]), got {got}")
    if array.shape[0] != num_edge_ids:
        raise InvalidRequestError(f"{where} has {array.shape[0]} rows for {num_edge_ids} edge ids")
    weights = array.astype(np.float64)
    bad = np.flatnonzero(~np.isfinite(weights) | (weights < 0))
    if bad.size:
        raise InvalidRequestError(
            f"{where}: edge {int(bad[0])} has weight {weights[bad[0]]}; weights must be finite and >= 0"
        )
    return weights


class WeightIndexes(AttrIndexCache[WeightIndex]):
    """The weight index of one weight attribute at a time, built on first use from the stored
    edge attribute and again when the feature store's version changes."""

    what = "weight index"

    def get(self, weight_attr: str) -> WeightIndex:
        """The index of ``weight_attr``.

        Raises:
            NotFoundError: no edge type of the graph has ``weight_attr``.
            InvalidRequestError: its values are not one finite, non-negative number per edge.
        """
        return super().get(weight_attr)

    def _build(self, weight_attr: str) -> WeightIndex:
        edges = self._engine.snapshot.edges
        groups = {edge_group_of(et): et for et in edges}
        found = [groups[s.group_name] for s in self._features.tensor_schema()
                 if s.attr_name == weight_attr and s.is_edge and s.group_name in groups]
        if not found:
            raise NotFoundError(f"no edge type has an edge feature {weight_attr!r} to sample by weight")
        return self._engine.weight_index({
            et: edge_weights(self._read(edge_group_of(et), weight_attr), et, weight_attr, edges[et].num_edge_ids)
            for et in found
        })
