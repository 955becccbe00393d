"""PyG's sampler inputs and outputs to and from their wire form.

Node ids in ``node`` are global; ``row``/``col`` and every index in ``metadata`` are local
(positions in the batch's node list); ``edge`` holds global edge ids. See ``graph.proto``.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numba
import numpy as np
import torch
from torch import Tensor
from torch.utils.data import get_worker_info
from torch_geometric.sampler import (
    EdgeSamplerInput,
    HeteroSamplerOutput,
    NegativeSampling,
    NodeSamplerInput,
    SamplerOutput,
)
from torch_geometric.typing import EdgeType, NodeType

from . import common_pb2, graph_pb2
from .codec import (
    attr_key_from_proto,
    attr_key_to_proto,
    attr_name_from_wire,
    attr_name_to_wire,
    describe,
    edge_type_from_proto,
    edge_type_to_proto,
    group_from_proto,
    ids_from_proto,
    ids_to_proto,
    node_type_from_proto,
    node_type_to_proto,
    optional_tensor_from_proto,
    optional_tensor_to_proto,
    set_group,
    tensor_from_proto,
    tensor_to_proto,
)
from gnnstore.common.cpu_prefetch import prefetch
from gnnstore.common.errors import InvalidRequestError
from gnnstore.common.graph_types import is_edge_group
from gnnstore.common.temporal import TEMPORAL_STRATEGIES, TemporalOptions
from .reply_segment import ArrayWriter

NeighborCounts = list[int] | dict[EdgeType, list[int]]


def options_to_proto(
    num_neighbors: NeighborCounts,
    *,
    replace: bool,
    disjoint: bool,
    seed: int | None,
    time_attr: str | None = None,
    temporal_strategy: str = "uniform",
    weight_attr: str | None = None,
) -> graph_pb2.SamplingOptions:
    """Encode PyG's ``num_neighbors`` (list or per-edge-type dict) and the sampler options."""
    options = graph_pb2.SamplingOptions(replace=replace, disjoint=disjoint, seed=seed, weight_attr=weight_attr or "")
    if time_attr is not None:
        options.time_attr, options.temporal_strategy = time_attr, temporal_strategy
    if isinstance(num_neighbors, Mapping):
        for edge_type, hops in num_neighbors.items():
            options.per_edge_type.add(
                edge_type=edge_type_to_proto(edge_type), num_neighbors=[int(k) for k in hops]
            )
    else:
        options.num_neighbors.extend(int(k) for k in num_neighbors)
        options.no_hops = not options.num_neighbors  # an empty repeated field is also an unsent one
    return options


def num_neighbors_from_proto(options: graph_pb2.SamplingOptions) -> NeighborCounts:
    """Decode ``num_neighbors`` as PyG takes it: a list, or a dict keyed by edge-type tuples.

    Raises:
        InvalidRequestError: both forms or neither were sent, or hops beside ``no_hops``.
    """
    if options.per_edge_type and options.num_neighbors:
        raise InvalidRequestError("send num_neighbors as a list or per edge type, not both")
    if options.no_hops:
        if options.per_edge_type or options.num_neighbors:
            raise InvalidRequestError("no_hops is set, but num_neighbors lists hops")
        return []
    if options.per_edge_type:
        return {
            edge_type_from_proto(f.edge_type): list(f.num_neighbors) for f in options.per_edge_type
        }
    if not options.num_neighbors:
        raise InvalidRequestError("num_neighbors was not sent (set no_hops for the seeds alone)")
    return list(options.num_neighbors)


def weight_attr_from_proto(options: graph_pb2.SamplingOptions) -> str | None:
    """The edge attribute the request samples by weight, or ``None`` (uniform).

    Raises:
        InvalidRequestError: together with temporal sampling.
    """
    if options.weight_attr and options.time_attr:
        raise InvalidRequestError("weighted and temporal sampling cannot be combined; choose one")
    return options.weight_attr or None


def temporal_from_proto(options: graph_pb2.SamplingOptions) -> TemporalOptions | None:
    """The request's temporal sampling, or ``None``.

    Raises:
        InvalidRequestError: a strategy without a time attribute, or an unknown strategy.
    """
    if not options.time_attr:
        if options.temporal_strategy:
            raise InvalidRequestError("temporal_strategy is set, but no time_attr to sample by")
        return None
    strategy = options.temporal_strategy or "uniform"
    if strategy not in TEMPORAL_STRATEGIES:
        raise InvalidRequestError(f"temporal_strategy must be one of {TEMPORAL_STRATEGIES}, got {strategy!r}")
    return TemporalOptions(options.time_attr, strategy)


def node_input_to_proto(inputs: NodeSamplerInput) -> graph_pb2.SampleFromNodesRequest:
    """Encode a NodeSamplerInput (global seed ids, seed times if any)."""
    request = graph_pb2.SampleFromNodesRequest(
        input_type=node_type_to_proto(inputs.input_type), node=ids_to_proto(inputs.node)
    )
    _put_input_id(request, inputs.input_id)
    _put_time(request, inputs.time)
    return request


def node_input_from_proto(request: graph_pb2.SampleFromNodesRequest) -> NodeSamplerInput:
    """Decode the seeds of a SampleFromNodes request."""
    node = ids_from_proto(request.node, "seed node ids")
    input_id = _input_id_from_proto(request)
    if input_id is not None and input_id.numel() != node.numel():
        raise InvalidRequestError(
            f"input_id has {input_id.numel()} entries for {node.numel()} seed nodes"
        )
    time = _time_from_proto(request, node.numel(), "seed nodes")
    return NodeSamplerInput(
        input_id=input_id, node=node, time=time, input_type=node_type_from_proto(request.input_type)
    )


def _put_time(
    request: graph_pb2.SampleFromNodesRequest | graph_pb2.SampleFromEdgesRequest, time: Tensor | None
) -> None:
    """Set the request's seed or link times (integers, as PyG's times are) if there are any.

    Raises:
        InvalidRequestError: floating-point times.
    """
    if time is not None:
        if time.dtype.is_floating_point:
            raise InvalidRequestError(f"seed and link times must be integers, got {time.dtype}")
        request.time.CopyFrom(ids_to_proto(time))


def _time_from_proto(
    request: graph_pb2.SampleFromNodesRequest | graph_pb2.SampleFromEdgesRequest, count: int, what: str
) -> Tensor | None:
    """The request's times, one per seed or link; ``None`` when unset."""
    if not request.HasField("time"):
        return None
    time = ids_from_proto(request.time, "times")
    if time.numel() != count:
        raise InvalidRequestError(f"time has {time.numel()} entries for {count} {what} (one each)")
    return time


def _put_input_id(
    request: graph_pb2.SampleFromNodesRequest | graph_pb2.SampleFromEdgesRequest, input_id: Tensor | None
) -> None:
    """Set the request's ``input_id`` unless there is none (PyG allows ``None``)."""
    if input_id is not None:
        request.input_id.CopyFrom(ids_to_proto(input_id))


def _input_id_from_proto(
    request: graph_pb2.SampleFromNodesRequest | graph_pb2.SampleFromEdgesRequest,
) -> Tensor | None:
    """The seeds' positions in the loader's list; ``None`` when the caller sent none (PyG allows it)."""
    return ids_from_proto(request.input_id, "input_id") if request.HasField("input_id") else None


def edge_input_to_proto(
    inputs: EdgeSamplerInput, neg_sampling: NegativeSampling | None
) -> graph_pb2.SampleFromEdgesRequest:
    """Encode an EdgeSamplerInput (global endpoint ids, link times if any) and its negative sampling.

    Raises:
        InvalidRequestError: the negative sampling has weights, or times are not integers.
    """
    request = graph_pb2.SampleFromEdgesRequest(
        input_type=edge_type_to_proto(inputs.input_type),
        row=ids_to_proto(inputs.row),
        col=ids_to_proto(inputs.col),
        label=optional_tensor_to_proto(inputs.label),
    )
    _put_input_id(request, inputs.input_id)
    _put_time(request, inputs.time)
    if neg_sampling is not None:
        if neg_sampling.src_weight is not None or neg_sampling.dst_weight is not None:
            raise InvalidRequestError("weighted negative sampling is not supported yet")
        request.neg_sampling.mode = neg_sampling.mode.value
        request.neg_sampling.amount = float(neg_sampling.amount)
    return request


def edge_input_from_proto(
    request: graph_pb2.SampleFromEdgesRequest,
) -> tuple[EdgeSamplerInput, NegativeSampling | None]:
    """Decode the positive links and negative sampling of a SampleFromEdges request.

    Raises:
        InvalidRequestError: mismatched lengths, or an unknown mode or bad amount.
    """
    row = ids_from_proto(request.row, "row (source ids)")
    col = ids_from_proto(request.col, "col (destination ids)")
    input_id = _input_id_from_proto(request)
    label = optional_tensor_from_proto(request.label, "edge label")
    counts = [row.numel(), col.numel(), *([] if input_id is None else [input_id.numel()])]
    if len(set(counts)) > 1:
        raise InvalidRequestError(
            f"row, col{' and input_id' if input_id is not None else ''} must have one entry per "
            f"link, got {' and '.join(map(str, counts))}"
        )
    if label is not None and (label.dim() == 0 or label.size(0) != row.numel()):
        rows = "a scalar" if label.dim() == 0 else f"{label.size(0)} rows"
        raise InvalidRequestError(f"edge label has {rows} for {row.numel()} links (one row per link)")
    neg_sampling = None
    if request.HasField("neg_sampling"):
        spec = request.neg_sampling
        try:
            neg_sampling = NegativeSampling(spec.mode, _amount(spec))
        except ValueError as exc:
            raise InvalidRequestError(
                f"bad negative sampling (mode {spec.mode!r}, amount {spec.amount}): {exc}"
            ) from None
    inputs = EdgeSamplerInput(
        input_id=input_id,
        row=row,
        col=col,
        label=label,
        time=_time_from_proto(request, row.numel(), "links"),
        input_type=edge_type_from_proto(request.input_type),
    )
    return inputs, neg_sampling


def _amount(spec: graph_pb2.NegativeSamplingSpec) -> int | float:
    """The amount as PyG wants it: an int when it is whole (triplet mode requires that)."""
    if not 0 < spec.amount < float("inf"):
        raise InvalidRequestError(f"negative sampling amount must be > 0 and finite, got {spec.amount}")
    return int(spec.amount) if float(spec.amount).is_integer() else spec.amount


def output_to_proto(
    out: SamplerOutput | HeteroSamplerOutput, segment: ArrayWriter | None = None
) -> graph_pb2.SampleResponse:
    """Encode a sampler output (its id tensors in ``segment`` when given); feature rows are
    added by the caller."""
    response = graph_pb2.SampleResponse(hetero=isinstance(out, HeteroSamplerOutput))
    if isinstance(out, HeteroSamplerOutput):
        nodes, rows, cols, edges = out.node, out.row, out.col, out.edge or {}
        batches = out.batch or {}
        node_counts, edge_counts = out.num_sampled_nodes, out.num_sampled_edges
    else:
        nodes, rows, cols = {None: out.node}, {None: out.row}, {None: out.col}
        edges = {} if out.edge is None else {None: out.edge}
        batches = {} if out.batch is None else {None: out.batch}
        node_counts = None if out.num_sampled_nodes is None else {None: out.num_sampled_nodes}
        edge_counts = None if out.num_sampled_edges is None else {None: out.num_sampled_edges}
    for node_type, node in nodes.items():
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
    metadata = out.metadata if isinstance(out.metadata, tuple) else (out.metadata,)
    response.metadata.extend(_metadata_entry(value) for value in metadata)
    return response


def _metadata_entry(value: object) -> common_pb2.OptionalTensor:
    if value is not None and not isinstance(value, Tensor):
        raise InvalidRequestError(f"sampler metadata holds a {type(value).__name__}, not a tensor")
    return optional_tensor_to_proto(value)


def output_from_proto(
    response: graph_pb2.SampleResponse, shared: memoryview | None = None
) -> SamplerOutput | HeteroSamplerOutput:
    """Decode a SampleResponse into the SamplerOutput / HeteroSamplerOutput PyG's loaders read
    (``shared``: the bytes of the reply segment the request offered; arrays there decode as
    views of it)."""
    node = {
        node_type_from_proto(n.node_type): ids_from_proto(n.ids, "sampled node ids", shared)
        for n in response.node
    }
    row, col, edge = {}, {}, {}
    for entry in response.edges:
        edge_type = edge_type_from_proto(entry.edge_type)
        row[edge_type] = ids_from_proto(entry.row, "sampled row", shared)
        col[edge_type] = ids_from_proto(entry.col, "sampled col", shared)
        if entry.HasField("edge"):
            edge[edge_type] = ids_from_proto(entry.edge, "sampled edge ids", shared)
    batch = {
        node_type_from_proto(b.node_type): ids_from_proto(b.ids, "batch", shared)
        for b in response.batch
    }
    node_counts = {
        node_type_from_proto(c.node_type): list(c.counts) for c in response.num_sampled_nodes
    }
    edge_counts = {
        edge_type_from_proto(c.edge_type): list(c.counts) for c in response.num_sampled_edges
    }
    metadata = tuple(optional_tensor_from_proto(m) for m in response.metadata)
    if response.hetero:
        return HeteroSamplerOutput(
            node=node,
            row=row,
            col=col,
            edge=edge or None,
            batch=batch or None,
            num_sampled_nodes=node_counts or None,
            num_sampled_edges=edge_counts or None,
            metadata=metadata,
        )
    return SamplerOutput(
        node=node[None],
        row=row[None],
        col=col[None],
        edge=edge.get(None),
        batch=batch.get(None),
        num_sampled_nodes=node_counts.get(None),
        num_sampled_edges=edge_counts.get(None),
        metadata=metadata,
    )


_GOLDEN = 0x9E3779B97F4A7C15


def seeded_call_seed(seed: int, call: int) -> int:
    """The random seed of call ``call`` of a sampler built with ``seed`` in this loader worker.

    The in-process and the remote sampler derive it alike, so ``seed=`` means the same run in
    both: distinct per (seed, DataLoader worker, call), a 64-bit unsigned int.
    """
    info = get_worker_info()
    worker = 0 if info is None else info.id + 1
    return (seed * _GOLDEN + worker * (_GOLDEN >> 7) + call) % (1 << 64)


def distinct_in_order(ids: np.ndarray) -> np.ndarray:
    """The distinct values of ``ids`` (non-negative ints) in order of first appearance.

    One pass over a map of the id range, without sorting: a batch's missing rows repeat
    whenever its seeds do (measured on 11.5k ids of a 1M range, half of them with repeats:
    0.35 ms against 1.05 for a bitmap check and ``np.unique``).
    """
    if ids.size < 2:
        return ids
    return _first_appearances(ids, np.zeros(int(ids.max()) + 1, dtype=np.bool_))


_SEEN_AHEAD = 16  # ids whose map entry is requested ahead: the map is read at random


@numba.njit(cache=True, nogil=True)
def _first_appearances(ids: np.ndarray, seen: np.ndarray) -> np.ndarray:
    out = np.empty_like(ids)
    count = 0
    for i in range(ids.shape[0]):
        if i + _SEEN_AHEAD < ids.shape[0]:
            prefetch(seen, ids[i + _SEEN_AHEAD])
        if not seen[ids[i]]:
            seen[ids[i]] = True
            out[count] = ids[i]
            count += 1
    return out[:count]


@dataclass(frozen=True)
class NodeRows:
    """Feature rows that travelled with a sample, for one node type or the sampled edges of one
    edge type.

    Attributes:
        group: the node type (``None`` for a homogeneous graph), or for edge attributes the
            edge type (``(None, None)`` for a homogeneous graph's edges).
        ids: global ids, distinct, in order of first appearance in the sample's node (or edge) list.
        rows: attr name → rows, row ``i`` belonging to ``ids[i]``.
        positions: ``None``, or the rows are *aligned*: ``ids[i]`` is node list entry
            ``positions[i]`` (ids repeat where the node list does), each tensor holds a row per
            node list entry, and only the rows at ``positions`` were written.
    """

    group: object
    ids: Tensor
    rows: dict[str, Tensor]
    positions: Tensor | None = None

    @property
    def bytes_unwritten(self) -> int:
        """Bytes of aligned rows left for the client to fill (0 for rows one per id)."""
        if self.positions is None:
            return 0
        return sum((len(t) - self.ids.numel()) * t[0].numel() * t.element_size() for t in self.rows.values() if len(t))

    def widened(self, dtypes: Mapping[str, torch.dtype], wire_dtype: torch.dtype) -> NodeRows:
        """The same rows with those that travelled as ``wire_dtype`` back in their attr's dtype
        (``dtypes``: attr name → stored dtype; only float32 and float64 attrs are narrowed)."""
        rows = {
            name: t.to(dtypes[name]) if t.dtype == wire_dtype and dtypes.get(name) in NARROWED_DTYPES else t
            for name, t in self.rows.items()
        }
        return NodeRows(self.group, self.ids, rows, self.positions)

    def compacted(self) -> NodeRows:
        """The same rows, one per id (aligned rows gathered out of their positions)."""
        if self.positions is None:
            return self
        return NodeRows(self.group, self.ids, {n: r[self.positions] for n, r in self.rows.items()})


@dataclass(frozen=True, eq=False)
class IdBitmap:
    """A set of ids as bits: bit ``i`` of ``bits`` (little-endian within each byte) is id
    ``start + i``; what a client names known ids with when that is smaller than a list."""

    start: int
    bits: np.ndarray  # uint8

    @classmethod
    def of(cls, ids: np.ndarray) -> IdBitmap:
        """The bitmap of ``ids`` (non-empty), from its smallest id to its largest."""
        start = int(ids.min())
        bits = np.zeros((int(ids.max()) - start) // 8 + 1, dtype=np.uint8)
        _set_bits(ids, start, bits)
        return cls(start, bits)

    @property
    def last_byte_start(self) -> int:
        """The first id the bitmap's last byte names (ids past the set's largest pad that byte)."""
        return self.start + 8 * (self.bits.size - 1)

    def holds(self, ids: np.ndarray) -> np.ndarray:
        """Which of ``ids`` are in the set (a mask); costs a pass over ``ids``, not the bitmap."""
        at = ids - self.start
        inside = (at >= 0) & (at < 8 * self.bits.size)
        held = np.zeros(ids.shape[0], dtype=bool)
        at = at[inside]
        held[inside] = (self.bits[at >> 3] >> (at & 7)) & 1 != 0
        return held


@numba.njit(cache=True, nogil=True)
def _set_bits(ids: np.ndarray, start: int, bits: np.ndarray) -> None:
    for i in range(ids.shape[0]):
        at = ids[i] - start
        bits[at >> 3] |= np.uint8(1 << (at & 7))


def compact_ids(ids: Tensor) -> Tensor | IdBitmap:
    """``ids`` (non-empty) as a list or a bitmap, whichever is smaller on the wire (a list of
    int32 ids takes 32 bits an id, a bitmap one bit per id of their range)."""
    span = int(ids.max()) - int(ids.min()) + 1
    return IdBitmap.of(ids.numpy()) if span < 32 * ids.numel() else ids


@dataclass(frozen=True)
class HotPrefix:
    """The client holds the rows of the first ``count`` ids of a HotNodes ranking of ``version``."""

    count: int
    version: str


WIRE_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16}
"""The dtypes rows of float attrs may travel as, by name (lossy: each value rounded)."""
NARROWED_DTYPES = (torch.float32, torch.float64)
"""Attr dtypes whose rows travel as a requested wire dtype; others travel as stored."""


@dataclass(frozen=True)
class RowRequest:
    """Which rows a sample should bring back, and which the client already holds.

    Attributes:
        attrs: (node type, attr) pairs whose rows come back for the sampled nodes.
        known: node type (or edge group) → global node (or edge) ids the client holds for
            every requested attr of that group, as a list or a bitmap.
        hot: node type → the prefix of the server's hot ranking the client holds.
        aligned: rows at their node list positions, if they fit in the reply segment.
        wire_dtype: a 16-bit float dtype rows of wider float attrs travel as (lossy; ``None``:
            as stored).
    """

    attrs: list[tuple[object, str]]
    known: dict[object, Tensor | IdBitmap]
    hot: dict[NodeType | None, HotPrefix]
    aligned: bool = False
    wire_dtype: torch.dtype | None = None


def feature_request_to_proto(
    attrs: Sequence[tuple[object, str]],
    known: Mapping[object, Tensor | IdBitmap],
    hot: Mapping[NodeType | None, HotPrefix] | None = None,
    wire_dtype: torch.dtype | None = None,
) -> graph_pb2.FeatureRequest:
    """Encode which attributes to return and, per node type or edge group, the ids not to send
    (give them through ``compact_ids``: a bitmap when that is smaller), and the dtype rows of
    float attrs travel as (``wire_dtype``, one of ``WIRE_DTYPES``' values; lossy)."""
    return graph_pb2.FeatureRequest(
        attrs=[attr_key_to_proto(group, name) for group, name in attrs],
        known=[_known_ids_to_proto(group, ids) for group, ids in known.items()],
        hot=[
            graph_pb2.HotPrefix(node_type=node_type_to_proto(nt), count=p.count, version=p.version)
            for nt, p in (hot or {}).items()
        ],
        wire_dtype="" if wire_dtype is None else wire_dtype_name(wire_dtype),
    )


def wire_dtype_name(dtype: torch.dtype | str) -> str:
    """The name of a dtype rows may travel as (``"bfloat16"`` or ``"float16"``).

    Raises:
        InvalidRequestError: any other dtype.
    """
    name = dtype if isinstance(dtype, str) else str(dtype).removeprefix("torch.")
    if name not in WIRE_DTYPES:
        raise InvalidRequestError(
            f"feature rows can travel as {sorted(WIRE_DTYPES)} (lossy) or as stored, not as {name[:40]!r}"
        )
    return name


def narrowed(dtype: torch.dtype | None, wire_dtype: torch.dtype | None) -> torch.dtype | None:
    """The dtype rows of a ``dtype`` attr travel as: ``wire_dtype`` for float32 and float64
    attrs when one is asked for, else their own."""
    return wire_dtype if wire_dtype is not None and dtype in NARROWED_DTYPES else dtype


def feature_request_from_proto(request: graph_pb2.FeatureRequest) -> RowRequest:
    """Decode the attrs, known ids, hot prefixes and wire dtype of a FeatureRequest.

    Raises:
        InvalidRequestError: a negative hot prefix count, or a wire dtype other than a 16-bit float.
    """
    hot = {}
    for prefix in request.hot:
        if prefix.count < 0:
            raise InvalidRequestError(f"hot prefix count must be >= 0, got {prefix.count}")
        hot[node_type_from_proto(prefix.node_type)] = HotPrefix(prefix.count, prefix.version)
    return RowRequest(
        attrs=[attr_key_from_proto(a) for a in request.attrs],
        known={group_from_proto(k, "node_type"): _known_ids_from_proto(k) for k in request.known},
        hot=hot,
        aligned=request.aligned,
        wire_dtype=WIRE_DTYPES[wire_dtype_name(request.wire_dtype)] if request.wire_dtype else None,
    )


def _known_ids_to_proto(group: object, ids: Tensor | IdBitmap) -> graph_pb2.KnownIds:
    message = graph_pb2.KnownIds()
    set_group(message, group, "node_type")
    if isinstance(ids, IdBitmap):
        message.bitmap, message.bitmap_start = ids.bits.tobytes(), ids.start
    else:
        message.ids.CopyFrom(ids_to_proto(ids))
    return message


def _known_ids_from_proto(message: graph_pb2.KnownIds) -> Tensor | IdBitmap:
    """Known ids as sent: a list, or a bitmap.

    Raises:
        InvalidRequestError: both a list and a bitmap.
    """
    if not message.bitmap:
        return ids_from_proto(message.ids, "known ids")
    if message.HasField("ids"):
        raise InvalidRequestError("known ids come as a list or as a bitmap, not both")
    return IdBitmap(message.bitmap_start, np.frombuffer(message.bitmap, dtype=np.uint8))


def node_rows_to_proto(rows: NodeRows, segment: ArrayWriter | None = None) -> graph_pb2.NodeRows:
    """Encode the rows of one group (in ``segment`` when given)."""
    message = graph_pb2.NodeRows(
        ids=ids_to_proto(rows.ids, segment),
        attr_names=[attr_name_to_wire(name) for name in rows.rows],
        rows=[tensor_to_proto(t, segment) for t in rows.rows.values()],
    )
    set_group(message, rows.group, "node_type")
    if rows.positions is not None:
        message.positions.CopyFrom(ids_to_proto(rows.positions, segment))
    return message


def node_rows_from_proto(message: graph_pb2.NodeRows, shared: memoryview | None = None) -> NodeRows:
    """Decode the rows of one group (``shared``: the reply segment's bytes, if offered;
    rows there decode as views of it).

    Raises:
        InvalidRequestError: names and tensors do not pair up, row counts differ from ids (from
            the node list for aligned rows), or positions outside it.
    """
    group = group_from_proto(message, "node_type")
    where = f"feature rows of {describe(group)}"
    ids = ids_from_proto(message.ids, f"{where}: ids", shared)
    positions = None
    if message.HasField("positions"):
        positions = ids_from_proto(message.positions, f"{where}: positions", shared)
        if positions.numel() != ids.numel():
            raise InvalidRequestError(f"{where}: {positions.numel()} positions for {ids.numel()} ids")
    if len(message.attr_names) != len(message.rows):
        raise InvalidRequestError(
            f"{where}: {len(message.attr_names)} attr names for {len(message.rows)} row tensors"
        )
    rows = {
        name: tensor_from_proto(t, f"{where}: attr {name!r}", shared)
        for name, t in zip(map(attr_name_from_wire, message.attr_names), message.rows)
    }
    for name, tensor in rows.items():
        if positions is not None:
            if tensor.dim() == 0 or positions.numel() and not (
                0 <= int(positions.min()) and int(positions.max()) < tensor.size(0)
            ):
                raise InvalidRequestError(
                    f"{where}: aligned attr {name!r} of shape {list(tensor.shape)} has no row at "
                    f"some of its {positions.numel()} positions"
                )
        elif tensor.dim() == 0 or tensor.size(0) != ids.numel():
            raise InvalidRequestError(
                f"{where}: attr {name!r} has {list(tensor.shape)} rows for {ids.numel()} ids"
            )
    if positions is not None and is_edge_group(group):
        raise InvalidRequestError(f"{where}: edge rows are never aligned")
    return NodeRows(group, ids, rows, positions)
