"""Sampler outputs to their wire form from a numpy ``Sample``: what the server encodes. The
client decodes them into PyG's types (``client/sampler_wire.py``).

Node ids in ``node`` are global; ``row``/``col`` and every index in ``metadata`` are local
(positions in the batch's node list); ``edge`` holds global edge ids. See ``graph.proto``.
"""
from __future__ import annotations

import numpy as np

from gnnstore.common.errors import InvalidRequestError
from gnnstore.common.sample import Sample

from . import common_pb2, graph_pb2
from .codec import (
    edge_type_to_proto,
    ids_to_proto,
    node_type_to_proto,
    optional_array_to_proto,
)
from .reply_segment import ArrayWriter


def output_to_proto(out: Sample, segment: ArrayWriter | None = None) -> graph_pb2.SampleResponse:
    """Encode a sample (its id arrays in ``segment`` when given); feature rows are added by the
    caller."""
    response = graph_pb2.SampleResponse(hetero=out.hetero)
    rows, cols, edges, batches = out.row, out.col, out.edge, out.batch or {}
    node_counts, edge_counts = out.num_sampled_nodes, out.num_sampled_edges
    for node_type, node in out.node.items():
        response.node.add(node_type=node_type_to_proto(node_type), ids=ids_to_proto(node, segment))
    for edge_type, row in rows.items():
        entry = response.edges.add(
            edge_type=edge_type_to_proto(edge_type),
            row=ids_to_proto(row, segment),
            col=ids_to_proto(cols[edge_type], segment),
        )
        if edges.get(edge_type) is not None:
            entry.edge.CopyFrom(ids_to_proto(edges[edge_type], segment))
    for node_type, batch in batches.items():
        response.batch.add(node_type=node_type_to_proto(node_type), ids=ids_to_proto(batch, segment))
    for node_type, counts in (node_counts or {}).items():
        response.num_sampled_nodes.add(
            node_type=node_type_to_proto(node_type), counts=[int(c) for c in counts]
        )
    for edge_type, counts in (edge_counts or {}).items():
        response.num_sampled_edges.add(
            edge_type=edge_type_to_proto(edge_type), counts=[int(c) for c in counts]
        )
    response.metadata.extend(_metadata_entry(value) for value in out.metadata)
    return response


def _metadata_entry(value: object) -> common_pb2.OptionalTensor:
    if value is not None and not isinstance(value, np.ndarray):
        raise InvalidRequestError(f"sampler metadata holds a {type(value).__name__}, not an array")
    return optional_array_to_proto(value)
