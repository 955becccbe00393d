"""Nodes ranked by out-degree per node type: the hot set a client's feature cache starts with.

Neighbour sampling over a CSC picks in-neighbours, so a node is reached about as often as it is
the source of an edge: its out-degree (summed over every edge type it is the source of) predicts
how often a mini-batch needs its features better than its in-degree does. The ranking is built
from the topology snapshot sampling reads, once per node type on first use, and carries the
snapshot's version so a client can say which ranking its hot set came from.
"""
from __future__ import annotations

import logging
import threading

import numpy as np

from gnnstore.backend.engine.topology import TopologySnapshot, edge_ends
from gnnstore.common.errors import InvalidRequestError, NotFoundError
from gnnstore.common.graph_types import NodeType

logger = logging.getLogger(__name__)

KEPT_HOT_MASKS = 4
"""Hot masks kept (node type and count); clients of one server mostly share a cache size."""


class DegreeRanking:
    """Per node type, global ids by out-degree, highest first (ties: ascending id).

    Args:
        snapshot: the topology snapshot the server samples from.
    """

    def __init__(self, snapshot: TopologySnapshot) -> None:
        self._snapshot = snapshot
        self._lock = threading.Lock()
        self._order: dict[NodeType | None, np.ndarray] = {}
        self._hot: dict[tuple[NodeType | None, int], np.ndarray] = {}  # the latest few hot masks

    @property
    def snapshot_id(self) -> str:
        """The snapshot version the ranking comes from."""
        return self._snapshot.version

    def top(self, node_type: NodeType | None, k: int) -> np.ndarray:
        """The ``k`` global ids of ``node_type`` with the highest out-degree (fewer if N < k).

        Raises:
            InvalidRequestError: ``k`` < 0.
            NotFoundError: an unknown node type.
        """
        if k < 0:
            raise InvalidRequestError(f"k must be >= 0, got {k}")
        return self._ranked(node_type)[:k].copy()

    def hot_mask(self, node_type: NodeType | None, count: int) -> np.ndarray:
        """Whether each node (by global id) is among the ``count`` highest-ranked.

        Every sampling request of a client with a hot set reads this for each sampled node: a
        byte per node stays in the CPU's caches where a rank per node would not.
        """
        order = self._ranked(node_type)
        key = (node_type, min(count, order.shape[0]))
        with self._lock:
            mask = self._hot.get(key)
            if mask is None:
                mask = np.zeros(order.shape[0], dtype=bool)
                mask[order[: key[1]]] = True
                if len(self._hot) >= KEPT_HOT_MASKS:
                    self._hot.pop(next(iter(self._hot)))
                self._hot[key] = mask
            return mask

    def _ranked(self, node_type: NodeType | None) -> np.ndarray:
        with self._lock:
            if node_type not in self._order:
                order = np.argsort(-self._out_degree(node_type), kind="stable")
                logger.info("ranked %d nodes of type %r by out-degree", order.shape[0], node_type)
                self._order[node_type] = order
            return self._order[node_type]

    def _out_degree(self, node_type: NodeType | None) -> np.ndarray:
        snapshot = self._snapshot
        if node_type not in snapshot.num_nodes:
            raise NotFoundError(
                f"node type {node_type!r} is not in the served graph (has: {snapshot.node_types})"
            )
        degree = np.zeros(snapshot.num_nodes[node_type], dtype=np.int64)
        for edge_type, topology in snapshot.edges.items():
            if edge_ends(edge_type)[0] == node_type and topology.num_edges:
                degree += np.bincount(topology.row, minlength=degree.shape[0])[: degree.shape[0]]
        return degree
