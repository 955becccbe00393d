from . import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class InfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class NodeTypeInfo(_message.Message):
    __slots__ = ("node_type", "num_nodes")
    NODE_TYPE_FIELD_NUMBER: _ClassVar[int]
    NUM_NODES_FIELD_NUMBER: _ClassVar[int]
    node_type: _common_pb2.NodeType
    num_nodes: int
    def __init__(self, node_type: _Optional[_Union[_common_pb2.NodeType, _Mapping]] = ..., num_nodes: _Optional[int] = ...) -> None: ...

class EdgeTypeInfo(_message.Message):
    __slots__ = ("edge_type", "num_edges", "num_src_nodes", "num_dst_nodes")
    EDGE_TYPE_FIELD_NUMBER: _ClassVar[int]
    NUM_EDGES_FIELD_NUMBER: _ClassVar[int]
    NUM_SRC_NODES_FIELD_NUMBER: _ClassVar[int]
    NUM_DST_NODES_FIELD_NUMBER: _ClassVar[int]
    edge_type: _common_pb2.EdgeType
    num_edges: int
    num_src_nodes: int
    num_dst_nodes: int
    def __init__(self, edge_type: _Optional[_Union[_common_pb2.EdgeType, _Mapping]] = ..., num_edges: _Optional[int] = ..., num_src_nodes: _Optional[int] = ..., num_dst_nodes: _Optional[int] = ...) -> None: ...

class InfoResponse(_message.Message):
    __slots__ = ("server_version", "graph_backend", "node_types", "edge_types", "features", "snapshot_id", "max_message_bytes", "graph_version")
    SERVER_VERSION_FIELD_NUMBER: _ClassVar[int]
    GRAPH_BACKEND_FIELD_NUMBER: _ClassVar[int]
    NODE_TYPES_FIELD_NUMBER: _ClassVar[int]
    EDGE_TYPES_FIELD_NUMBER: _ClassVar[int]
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_ID_FIELD_NUMBER: _ClassVar[int]
    MAX_MESSAGE_BYTES_FIELD_NUMBER: _ClassVar[int]
    GRAPH_VERSION_FIELD_NUMBER: _ClassVar[int]
    server_version: str
    graph_backend: str
    node_types: _containers.RepeatedCompositeFieldContainer[NodeTypeInfo]
    edge_types: _containers.RepeatedCompositeFieldContainer[EdgeTypeInfo]
    features: _containers.RepeatedCompositeFieldContainer[_common_pb2.TensorSchema]
    snapshot_id: str
    max_message_bytes: int
    graph_version: int
    def __init__(self, server_version: _Optional[str] = ..., graph_backend: _Optional[str] = ..., node_types: _Optional[_Iterable[_Union[NodeTypeInfo, _Mapping]]] = ..., edge_types: _Optional[_Iterable[_Union[EdgeTypeInfo, _Mapping]]] = ..., features: _Optional[_Iterable[_Union[_common_pb2.TensorSchema, _Mapping]]] = ..., snapshot_id: _Optional[str] = ..., max_message_bytes: _Optional[int] = ..., graph_version: _Optional[int] = ...) -> None: ...

class StatsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class MethodStats(_message.Message):
    __slots__ = ("method", "requests", "errors", "latency_p50_ms", "latency_p99_ms", "latency_mean_ms", "bytes_received", "bytes_sent", "bytes_shared", "retries")
    METHOD_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    LATENCY_P50_MS_FIELD_NUMBER: _ClassVar[int]
    LATENCY_P99_MS_FIELD_NUMBER: _ClassVar[int]
    LATENCY_MEAN_MS_FIELD_NUMBER: _ClassVar[int]
    BYTES_RECEIVED_FIELD_NUMBER: _ClassVar[int]
    BYTES_SENT_FIELD_NUMBER: _ClassVar[int]
    BYTES_SHARED_FIELD_NUMBER: _ClassVar[int]
    RETRIES_FIELD_NUMBER: _ClassVar[int]
    method: str
    requests: int
    errors: int
    latency_p50_ms: float
    latency_p99_ms: float
    latency_mean_ms: float
    bytes_received: int
    bytes_sent: int
    bytes_shared: int
    retries: int
    def __init__(self, method: _Optional[str] = ..., requests: _Optional[int] = ..., errors: _Optional[int] = ..., latency_p50_ms: _Optional[float] = ..., latency_p99_ms: _Optional[float] = ..., latency_mean_ms: _Optional[float] = ..., bytes_received: _Optional[int] = ..., bytes_sent: _Optional[int] = ..., bytes_shared: _Optional[int] = ..., retries: _Optional[int] = ...) -> None: ...

class ClientStats(_message.Message):
    __slots__ = ("client", "role", "requests", "errors", "bytes_received", "bytes_sent", "retries")
    CLIENT_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    BYTES_RECEIVED_FIELD_NUMBER: _ClassVar[int]
    BYTES_SENT_FIELD_NUMBER: _ClassVar[int]
    RETRIES_FIELD_NUMBER: _ClassVar[int]
    client: str
    role: str
    requests: int
    errors: int
    bytes_received: int
    bytes_sent: int
    retries: int
    def __init__(self, client: _Optional[str] = ..., role: _Optional[str] = ..., requests: _Optional[int] = ..., errors: _Optional[int] = ..., bytes_received: _Optional[int] = ..., bytes_sent: _Optional[int] = ..., retries: _Optional[int] = ...) -> None: ...

class StatsResponse(_message.Message):
    __slots__ = ("uptime_s", "methods", "clients", "reply_segments_mapped")
    UPTIME_S_FIELD_NUMBER: _ClassVar[int]
    METHODS_FIELD_NUMBER: _ClassVar[int]
    CLIENTS_FIELD_NUMBER: _ClassVar[int]
    REPLY_SEGMENTS_MAPPED_FIELD_NUMBER: _ClassVar[int]
    uptime_s: float
    methods: _containers.RepeatedCompositeFieldContainer[MethodStats]
    clients: _containers.RepeatedCompositeFieldContainer[ClientStats]
    reply_segments_mapped: int
    def __init__(self, uptime_s: _Optional[float] = ..., methods: _Optional[_Iterable[_Union[MethodStats, _Mapping]]] = ..., clients: _Optional[_Iterable[_Union[ClientStats, _Mapping]]] = ..., reply_segments_mapped: _Optional[int] = ...) -> None: ...
