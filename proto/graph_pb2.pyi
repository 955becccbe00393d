from . import common_pb2 as _common_pb2
from . import idmap_pb2 as _idmap_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ListEdgeAttrsRequest(_message.Message):
    __slots__ = ("graph_version",)
    GRAPH_VERSION_FIELD_NUMBER: _ClassVar[int]
    graph_version: int
    def __init__(self, graph_version: _Optional[int] = ...) -> None: ...

class EdgeAttrInfo(_message.Message):
    __slots__ = ("edge_type", "layout", "is_sorted", "num_src_nodes", "num_dst_nodes", "num_edges")
    EDGE_TYPE_FIELD_NUMBER: _ClassVar[int]
    LAYOUT_FIELD_NUMBER: _ClassVar[int]
    IS_SORTED_FIELD_NUMBER: _ClassVar[int]
    NUM_SRC_NODES_FIELD_NUMBER: _ClassVar[int]
    NUM_DST_NODES_FIELD_NUMBER: _ClassVar[int]
    NUM_EDGES_FIELD_NUMBER: _ClassVar[int]
    edge_type: _common_pb2.EdgeType
    layout: str
    is_sorted: bool
    num_src_nodes: int
    num_dst_nodes: int
    num_edges: int
    def __init__(self, edge_type: _Optional[_Union[_common_pb2.EdgeType, _Mapping]] = ..., layout: _Optional[str] = ..., is_sorted: _Optional[bool] = ..., num_src_nodes: _Optional[int] = ..., num_dst_nodes: _Optional[int] = ..., num_edges: _Optional[int] = ...) -> None: ...

class ListEdgeAttrsResponse(_message.Message):
    __slots__ = ("edge_attrs", "graph_version")
    EDGE_ATTRS_FIELD_NUMBER: _ClassVar[int]
    GRAPH_VERSION_FIELD_NUMBER: _ClassVar[int]
    edge_attrs: _containers.RepeatedCompositeFieldContainer[EdgeAttrInfo]
    graph_version: int
    def __init__(self, edge_attrs: _Optional[_Iterable[_Union[EdgeAttrInfo, _Mapping]]] = ..., graph_version: _Optional[int] = ...) -> None: ...

class GetEdgeIndexRequest(_message.Message):
    __slots__ = ("edge_type", "layout", "chunk_elements", "graph_version")
    EDGE_TYPE_FIELD_NUMBER: _ClassVar[int]
    LAYOUT_FIELD_NUMBER: _ClassVar[int]
    CHUNK_ELEMENTS_FIELD_NUMBER: _ClassVar[int]
    GRAPH_VERSION_FIELD_NUMBER: _ClassVar[int]
    edge_type: _common_pb2.EdgeType
    layout: str
    chunk_elements: int
    graph_version: int
    def __init__(self, edge_type: _Optional[_Union[_common_pb2.EdgeType, _Mapping]] = ..., layout: _Optional[str] = ..., chunk_elements: _Optional[int] = ..., graph_version: _Optional[int] = ...) -> None: ...

class EdgeIndexChunk(_message.Message):
    __slots__ = ("first", "second")
    FIRST_FIELD_NUMBER: _ClassVar[int]
    SECOND_FIELD_NUMBER: _ClassVar[int]
    first: _common_pb2.Tensor
    second: _common_pb2.Tensor
    def __init__(self, first: _Optional[_Union[_common_pb2.Tensor, _Mapping]] = ..., second: _Optional[_Union[_common_pb2.Tensor, _Mapping]] = ...) -> None: ...

class Fanout(_message.Message):
    __slots__ = ("edge_type", "num_neighbors")
    EDGE_TYPE_FIELD_NUMBER: _ClassVar[int]
    NUM_NEIGHBORS_FIELD_NUMBER: _ClassVar[int]
    edge_type: _common_pb2.EdgeType
    num_neighbors: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, edge_type: _Optional[_Union[_common_pb2.EdgeType, _Mapping]] = ..., num_neighbors: _Optional[_Iterable[int]] = ...) -> None: ...

class SamplingOptions(_message.Message):
    __slots__ = ("num_neighbors", "per_edge_type", "replace", "disjoint", "seed", "no_hops", "time_attr", "temporal_strategy", "weight_attr", "graph_version")
    NUM_NEIGHBORS_FIELD_NUMBER: _ClassVar[int]
    PER_EDGE_TYPE_FIELD_NUMBER: _ClassVar[int]
    REPLACE_FIELD_NUMBER: _ClassVar[int]
    DISJOINT_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    NO_HOPS_FIELD_NUMBER: _ClassVar[int]
    TIME_ATTR_FIELD_NUMBER: _ClassVar[int]
    TEMPORAL_STRATEGY_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_ATTR_FIELD_NUMBER: _ClassVar[int]
    GRAPH_VERSION_FIELD_NUMBER: _ClassVar[int]
    num_neighbors: _containers.RepeatedScalarFieldContainer[int]
    per_edge_type: _containers.RepeatedCompositeFieldContainer[Fanout]
    replace: bool
    disjoint: bool
    seed: int
    no_hops: bool
    time_attr: str
    temporal_strategy: str
    weight_attr: str
    graph_version: int
    def __init__(self, num_neighbors: _Optional[_Iterable[int]] = ..., per_edge_type: _Optional[_Iterable[_Union[Fanout, _Mapping]]] = ..., replace: _Optional[bool] = ..., disjoint: _Optional[bool] = ..., seed: _Optional[int] = ..., no_hops: _Optional[bool] = ..., time_attr: _Optional[str] = ..., temporal_strategy: _Optional[str] = ..., weight_attr: _Optional[str] = ..., graph_version: _Optional[int] = ...) -> None: ...

class HotPrefix(_message.Message):
    __slots__ = ("node_type", "count", "snapshot_id")
    NODE_TYPE_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_ID_FIELD_NUMBER: _ClassVar[int]
    node_type: _common_pb2.NodeType
    count: int
    snapshot_id: str
    def __init__(self, node_type: _Optional[_Union[_common_pb2.NodeType, _Mapping]] = ..., count: _Optional[int] = ..., snapshot_id: _Optional[str] = ...) -> None: ...

class FeatureRequest(_message.Message):
    __slots__ = ("attrs", "known", "hot", "aligned", "wire_dtype")
    ATTRS_FIELD_NUMBER: _ClassVar[int]
    KNOWN_FIELD_NUMBER: _ClassVar[int]
    HOT_FIELD_NUMBER: _ClassVar[int]
    ALIGNED_FIELD_NUMBER: _ClassVar[int]
    WIRE_DTYPE_FIELD_NUMBER: _ClassVar[int]
    attrs: _containers.RepeatedCompositeFieldContainer[_common_pb2.TensorAttrKey]
    known: _containers.RepeatedCompositeFieldContainer[KnownIds]
    hot: _containers.RepeatedCompositeFieldContainer[HotPrefix]
    aligned: bool
    wire_dtype: str
    def __init__(self, attrs: _Optional[_Iterable[_Union[_common_pb2.TensorAttrKey, _Mapping]]] = ..., known: _Optional[_Iterable[_Union[KnownIds, _Mapping]]] = ..., hot: _Optional[_Iterable[_Union[HotPrefix, _Mapping]]] = ..., aligned: _Optional[bool] = ..., wire_dtype: _Optional[str] = ...) -> None: ...

class KnownIds(_message.Message):
    __slots__ = ("node_type", "ids", "bitmap", "bitmap_start", "edge_group")
    NODE_TYPE_FIELD_NUMBER: _ClassVar[int]
    IDS_FIELD_NUMBER: _ClassVar[int]
    BITMAP_FIELD_NUMBER: _ClassVar[int]
    BITMAP_START_FIELD_NUMBER: _ClassVar[int]
    EDGE_GROUP_FIELD_NUMBER: _ClassVar[int]
    node_type: _common_pb2.NodeType
    ids: _common_pb2.Tensor
    bitmap: bytes
    bitmap_start: int
    edge_group: _common_pb2.EdgeType
    def __init__(self, node_type: _Optional[_Union[_common_pb2.NodeType, _Mapping]] = ..., ids: _Optional[_Union[_common_pb2.Tensor, _Mapping]] = ..., bitmap: _Optional[bytes] = ..., bitmap_start: _Optional[int] = ..., edge_group: _Optional[_Union[_common_pb2.EdgeType, _Mapping]] = ...) -> None: ...

class HotNodesRequest(_message.Message):
    __slots__ = ("node_type", "k")
    NODE_TYPE_FIELD_NUMBER: _ClassVar[int]
    K_FIELD_NUMBER: _ClassVar[int]
    node_type: _common_pb2.NodeType
    k: int
    def __init__(self, node_type: _Optional[_Union[_common_pb2.NodeType, _Mapping]] = ..., k: _Optional[int] = ...) -> None: ...

class HotNodesResponse(_message.Message):
    __slots__ = ("ids", "snapshot_id")
    IDS_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_ID_FIELD_NUMBER: _ClassVar[int]
    ids: _common_pb2.Tensor
    snapshot_id: str
    def __init__(self, ids: _Optional[_Union[_common_pb2.Tensor, _Mapping]] = ..., snapshot_id: _Optional[str] = ...) -> None: ...

class ReplySegment(_message.Message):
    __slots__ = ("pid", "fd", "inode", "size", "nonce")
    PID_FIELD_NUMBER: _ClassVar[int]
    FD_FIELD_NUMBER: _ClassVar[int]
    INODE_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    NONCE_FIELD_NUMBER: _ClassVar[int]
    pid: int
    fd: int
    inode: int
    size: int
    nonce: bytes
    def __init__(self, pid: _Optional[int] = ..., fd: _Optional[int] = ..., inode: _Optional[int] = ..., size: _Optional[int] = ..., nonce: _Optional[bytes] = ...) -> None: ...

class ReplySegmentUse(_message.Message):
    __slots__ = ("used", "refused", "needed_bytes", "placed_bytes")
    USED_FIELD_NUMBER: _ClassVar[int]
    REFUSED_FIELD_NUMBER: _ClassVar[int]
    NEEDED_BYTES_FIELD_NUMBER: _ClassVar[int]
    PLACED_BYTES_FIELD_NUMBER: _ClassVar[int]
    used: bool
    refused: str
    needed_bytes: int
    placed_bytes: int
    def __init__(self, used: _Optional[bool] = ..., refused: _Optional[str] = ..., needed_bytes: _Optional[int] = ..., placed_bytes: _Optional[int] = ...) -> None: ...

class SampleFromNodesRequest(_message.Message):
    __slots__ = ("options", "input_type", "node", "input_id", "features", "reply_segment", "accept_payload", "time", "accept_data_port")
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    INPUT_TYPE_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    INPUT_ID_FIELD_NUMBER: _ClassVar[int]
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    REPLY_SEGMENT_FIELD_NUMBER: _ClassVar[int]
    ACCEPT_PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    ACCEPT_DATA_PORT_FIELD_NUMBER: _ClassVar[int]
    options: SamplingOptions
    input_type: _common_pb2.NodeType
    node: _common_pb2.Tensor
    input_id: _common_pb2.Tensor
    features: FeatureRequest
    reply_segment: ReplySegment
    accept_payload: bool
    time: _common_pb2.Tensor
    accept_data_port: bool
    def __init__(self, options: _Optional[_Union[SamplingOptions, _Mapping]] = ..., input_type: _Optional[_Union[_common_pb2.NodeType, _Mapping]] = ..., node: _Optional[_Union[_common_pb2.Tensor, _Mapping]] = ..., input_id: _Optional[_Union[_common_pb2.Tensor, _Mapping]] = ..., features: _Optional[_Union[FeatureRequest, _Mapping]] = ..., reply_segment: _Optional[_Union[ReplySegment, _Mapping]] = ..., accept_payload: _Optional[bool] = ..., time: _Optional[_Union[_common_pb2.Tensor, _Mapping]] = ..., accept_data_port: _Optional[bool] = ...) -> None: ...

class NegativeSamplingSpec(_message.Message):
    __slots__ = ("mode", "amount")
    MODE_FIELD_NUMBER: _ClassVar[int]
    AMOUNT_FIELD_NUMBER: _ClassVar[int]
    mode: str
    amount: float
    def __init__(self, mode: _Optional[str] = ..., amount: _Optional[float] = ...) -> None: ...

class SampleFromEdgesRequest(_message.Message):
    __slots__ = ("options", "input_type", "input_id", "row", "col", "label", "neg_sampling", "features", "reply_segment", "accept_payload", "time", "accept_data_port")
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    INPUT_TYPE_FIELD_NUMBER: _ClassVar[int]
    INPUT_ID_FIELD_NUMBER: _ClassVar[int]
    ROW_FIELD_NUMBER: _ClassVar[int]
    COL_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    NEG_SAMPLING_FIELD_NUMBER: _ClassVar[int]
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    REPLY_SEGMENT_FIELD_NUMBER: _ClassVar[int]
    ACCEPT_PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    ACCEPT_DATA_PORT_FIELD_NUMBER: _ClassVar[int]
    options: SamplingOptions
    input_type: _common_pb2.EdgeType
    input_id: _common_pb2.Tensor
    row: _common_pb2.Tensor
    col: _common_pb2.Tensor
    label: _common_pb2.OptionalTensor
    neg_sampling: NegativeSamplingSpec
    features: FeatureRequest
    reply_segment: ReplySegment
    accept_payload: bool
    time: _common_pb2.Tensor
    accept_data_port: bool
    def __init__(self, options: _Optional[_Union[SamplingOptions, _Mapping]] = ..., input_type: _Optional[_Union[_common_pb2.EdgeType, _Mapping]] = ..., input_id: _Optional[_Union[_common_pb2.Tensor, _Mapping]] = ..., row: _Optional[_Union[_common_pb2.Tensor, _Mapping]] = ..., col: _Optional[_Union[_common_pb2.Tensor, _Mapping]] = ..., label: _Optional[_Union[_common_pb2.OptionalTensor, _Mapping]] = ..., neg_sampling: _Optional[_Union[NegativeSamplingSpec, _Mapping]] = ..., features: _Optional[_Union[FeatureRequest, _Mapping]] = ..., reply_segment: _Optional[_Union[ReplySegment, _Mapping]] = ..., accept_payload: _Optional[bool] = ..., time: _Optional[_Union[_common_pb2.Tensor, _Mapping]] = ..., accept_data_port: _Optional[bool] = ...) -> None: ...

class SampledEdges(_message.Message):
    __slots__ = ("edge_type", "row", "col", "edge")
    EDGE_TYPE_FIELD_NUMBER: _ClassVar[int]
    ROW_FIELD_NUMBER: _ClassVar[int]
    COL_FIELD_NUMBER: _ClassVar[int]
    EDGE_FIELD_NUMBER: _ClassVar[int]
    edge_type: _common_pb2.EdgeType
    row: _common_pb2.Tensor
    col: _common_pb2.Tensor
    edge: _common_pb2.Tensor
    def __init__(self, edge_type: _Optional[_Union[_common_pb2.EdgeType, _Mapping]] = ..., row: _Optional[_Union[_common_pb2.Tensor, _Mapping]] = ..., col: _Optional[_Union[_common_pb2.Tensor, _Mapping]] = ..., edge: _Optional[_Union[_common_pb2.Tensor, _Mapping]] = ...) -> None: ...

class NodeRows(_message.Message):
    __slots__ = ("node_type", "ids", "attr_names", "rows", "positions", "edge_group")
    NODE_TYPE_FIELD_NUMBER: _ClassVar[int]
    IDS_FIELD_NUMBER: _ClassVar[int]
    ATTR_NAMES_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    POSITIONS_FIELD_NUMBER: _ClassVar[int]
    EDGE_GROUP_FIELD_NUMBER: _ClassVar[int]
    node_type: _common_pb2.NodeType
    ids: _common_pb2.Tensor
    attr_names: _containers.RepeatedScalarFieldContainer[str]
    rows: _containers.RepeatedCompositeFieldContainer[_common_pb2.Tensor]
    positions: _common_pb2.Tensor
    edge_group: _common_pb2.EdgeType
    def __init__(self, node_type: _Optional[_Union[_common_pb2.NodeType, _Mapping]] = ..., ids: _Optional[_Union[_common_pb2.Tensor, _Mapping]] = ..., attr_names: _Optional[_Iterable[str]] = ..., rows: _Optional[_Iterable[_Union[_common_pb2.Tensor, _Mapping]]] = ..., positions: _Optional[_Union[_common_pb2.Tensor, _Mapping]] = ..., edge_group: _Optional[_Union[_common_pb2.EdgeType, _Mapping]] = ...) -> None: ...

class DataPortTicket(_message.Message):
    __slots__ = ("ticket", "port", "size")
    TICKET_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    ticket: bytes
    port: int
    size: int
    def __init__(self, ticket: _Optional[bytes] = ..., port: _Optional[int] = ..., size: _Optional[int] = ...) -> None: ...

class SampleResponse(_message.Message):
    __slots__ = ("hetero", "node", "edges", "batch", "num_sampled_nodes", "num_sampled_edges", "metadata", "features", "reply_segment", "payload", "data_port_ticket", "graph_version", "data_port_full")
    HETERO_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    EDGES_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    NUM_SAMPLED_NODES_FIELD_NUMBER: _ClassVar[int]
    NUM_SAMPLED_EDGES_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    REPLY_SEGMENT_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    DATA_PORT_TICKET_FIELD_NUMBER: _ClassVar[int]
    GRAPH_VERSION_FIELD_NUMBER: _ClassVar[int]
    DATA_PORT_FULL_FIELD_NUMBER: _ClassVar[int]
    hetero: bool
    node: _containers.RepeatedCompositeFieldContainer[_common_pb2.NodeIds]
    edges: _containers.RepeatedCompositeFieldContainer[SampledEdges]
    batch: _containers.RepeatedCompositeFieldContainer[_common_pb2.NodeIds]
    num_sampled_nodes: _containers.RepeatedCompositeFieldContainer[_common_pb2.NodeCounts]
    num_sampled_edges: _containers.RepeatedCompositeFieldContainer[_common_pb2.EdgeCounts]
    metadata: _containers.RepeatedCompositeFieldContainer[_common_pb2.OptionalTensor]
    features: _containers.RepeatedCompositeFieldContainer[NodeRows]
    reply_segment: ReplySegmentUse
    payload: bytes
    data_port_ticket: DataPortTicket
    graph_version: int
    data_port_full: bool
    def __init__(self, hetero: _Optional[bool] = ..., node: _Optional[_Iterable[_Union[_common_pb2.NodeIds, _Mapping]]] = ..., edges: _Optional[_Iterable[_Union[SampledEdges, _Mapping]]] = ..., batch: _Optional[_Iterable[_Union[_common_pb2.NodeIds, _Mapping]]] = ..., num_sampled_nodes: _Optional[_Iterable[_Union[_common_pb2.NodeCounts, _Mapping]]] = ..., num_sampled_edges: _Optional[_Iterable[_Union[_common_pb2.EdgeCounts, _Mapping]]] = ..., metadata: _Optional[_Iterable[_Union[_common_pb2.OptionalTensor, _Mapping]]] = ..., features: _Optional[_Iterable[_Union[NodeRows, _Mapping]]] = ..., reply_segment: _Optional[_Union[ReplySegmentUse, _Mapping]] = ..., payload: _Optional[bytes] = ..., data_port_ticket: _Optional[_Union[DataPortTicket, _Mapping]] = ..., graph_version: _Optional[int] = ..., data_port_full: _Optional[bool] = ...) -> None: ...

class NodeKeys(_message.Message):
    __slots__ = ("node_type", "keys", "rows")
    NODE_TYPE_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    node_type: _common_pb2.NodeType
    keys: _idmap_pb2.Keys
    rows: _containers.RepeatedCompositeFieldContainer[KeyRows]
    def __init__(self, node_type: _Optional[_Union[_common_pb2.NodeType, _Mapping]] = ..., keys: _Optional[_Union[_idmap_pb2.Keys, _Mapping]] = ..., rows: _Optional[_Iterable[_Union[KeyRows, _Mapping]]] = ...) -> None: ...

class KeyRows(_message.Message):
    __slots__ = ("attr_name", "value")
    ATTR_NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    attr_name: str
    value: _common_pb2.Tensor
    def __init__(self, attr_name: _Optional[str] = ..., value: _Optional[_Union[_common_pb2.Tensor, _Mapping]] = ...) -> None: ...

class EdgeChanges(_message.Message):
    __slots__ = ("edge_type", "add_src", "add_dst", "remove")
    EDGE_TYPE_FIELD_NUMBER: _ClassVar[int]
    ADD_SRC_FIELD_NUMBER: _ClassVar[int]
    ADD_DST_FIELD_NUMBER: _ClassVar[int]
    REMOVE_FIELD_NUMBER: _ClassVar[int]
    edge_type: _common_pb2.EdgeType
    add_src: _common_pb2.Tensor
    add_dst: _common_pb2.Tensor
    remove: _common_pb2.Tensor
    def __init__(self, edge_type: _Optional[_Union[_common_pb2.EdgeType, _Mapping]] = ..., add_src: _Optional[_Union[_common_pb2.Tensor, _Mapping]] = ..., add_dst: _Optional[_Union[_common_pb2.Tensor, _Mapping]] = ..., remove: _Optional[_Union[_common_pb2.Tensor, _Mapping]] = ...) -> None: ...

class WriteGraphRequest(_message.Message):
    __slots__ = ("nodes", "edges", "remove_nodes")
    NODES_FIELD_NUMBER: _ClassVar[int]
    EDGES_FIELD_NUMBER: _ClassVar[int]
    REMOVE_NODES_FIELD_NUMBER: _ClassVar[int]
    nodes: _containers.RepeatedCompositeFieldContainer[NodeKeys]
    edges: _containers.RepeatedCompositeFieldContainer[EdgeChanges]
    remove_nodes: _containers.RepeatedCompositeFieldContainer[_common_pb2.NodeIds]
    def __init__(self, nodes: _Optional[_Iterable[_Union[NodeKeys, _Mapping]]] = ..., edges: _Optional[_Iterable[_Union[EdgeChanges, _Mapping]]] = ..., remove_nodes: _Optional[_Iterable[_Union[_common_pb2.NodeIds, _Mapping]]] = ...) -> None: ...

class WrittenEdges(_message.Message):
    __slots__ = ("edge_type", "added", "removed")
    EDGE_TYPE_FIELD_NUMBER: _ClassVar[int]
    ADDED_FIELD_NUMBER: _ClassVar[int]
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    edge_type: _common_pb2.EdgeType
    added: _common_pb2.Tensor
    removed: _common_pb2.Tensor
    def __init__(self, edge_type: _Optional[_Union[_common_pb2.EdgeType, _Mapping]] = ..., added: _Optional[_Union[_common_pb2.Tensor, _Mapping]] = ..., removed: _Optional[_Union[_common_pb2.Tensor, _Mapping]] = ...) -> None: ...

class WriteGraphResponse(_message.Message):
    __slots__ = ("graph_version", "node_ids", "edges")
    GRAPH_VERSION_FIELD_NUMBER: _ClassVar[int]
    NODE_IDS_FIELD_NUMBER: _ClassVar[int]
    EDGES_FIELD_NUMBER: _ClassVar[int]
    graph_version: int
    node_ids: _containers.RepeatedCompositeFieldContainer[_common_pb2.NodeIds]
    edges: _containers.RepeatedCompositeFieldContainer[WrittenEdges]
    def __init__(self, graph_version: _Optional[int] = ..., node_ids: _Optional[_Iterable[_Union[_common_pb2.NodeIds, _Mapping]]] = ..., edges: _Optional[_Iterable[_Union[WrittenEdges, _Mapping]]] = ...) -> None: ...
