from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Tensor(_message.Message):
    __slots__ = ("dtype", "shape", "data", "shared")
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    SHARED_FIELD_NUMBER: _ClassVar[int]
    dtype: str
    shape: _containers.RepeatedScalarFieldContainer[int]
    data: bytes
    shared: SegmentSlice
    def __init__(self, dtype: _Optional[str] = ..., shape: _Optional[_Iterable[int]] = ..., data: _Optional[bytes] = ..., shared: _Optional[_Union[SegmentSlice, _Mapping]] = ...) -> None: ...

class SegmentSlice(_message.Message):
    __slots__ = ("offset", "length")
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    LENGTH_FIELD_NUMBER: _ClassVar[int]
    offset: int
    length: int
    def __init__(self, offset: _Optional[int] = ..., length: _Optional[int] = ...) -> None: ...

class OptionalTensor(_message.Message):
    __slots__ = ("is_none", "value")
    IS_NONE_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    is_none: bool
    value: Tensor
    def __init__(self, is_none: _Optional[bool] = ..., value: _Optional[_Union[Tensor, _Mapping]] = ...) -> None: ...

class NodeType(_message.Message):
    __slots__ = ("homogeneous", "name")
    HOMOGENEOUS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    homogeneous: bool
    name: str
    def __init__(self, homogeneous: _Optional[bool] = ..., name: _Optional[str] = ...) -> None: ...

class EdgeType(_message.Message):
    __slots__ = ("homogeneous", "src", "rel", "dst")
    HOMOGENEOUS_FIELD_NUMBER: _ClassVar[int]
    SRC_FIELD_NUMBER: _ClassVar[int]
    REL_FIELD_NUMBER: _ClassVar[int]
    DST_FIELD_NUMBER: _ClassVar[int]
    homogeneous: bool
    src: str
    rel: str
    dst: str
    def __init__(self, homogeneous: _Optional[bool] = ..., src: _Optional[str] = ..., rel: _Optional[str] = ..., dst: _Optional[str] = ...) -> None: ...

class TensorAttrKey(_message.Message):
    __slots__ = ("group", "attr_name", "edge_group")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    ATTR_NAME_FIELD_NUMBER: _ClassVar[int]
    EDGE_GROUP_FIELD_NUMBER: _ClassVar[int]
    group: NodeType
    attr_name: str
    edge_group: EdgeType
    def __init__(self, group: _Optional[_Union[NodeType, _Mapping]] = ..., attr_name: _Optional[str] = ..., edge_group: _Optional[_Union[EdgeType, _Mapping]] = ...) -> None: ...

class TensorSchema(_message.Message):
    __slots__ = ("key", "dtype", "shape")
    KEY_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    key: TensorAttrKey
    dtype: str
    shape: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, key: _Optional[_Union[TensorAttrKey, _Mapping]] = ..., dtype: _Optional[str] = ..., shape: _Optional[_Iterable[int]] = ...) -> None: ...

class NodeIds(_message.Message):
    __slots__ = ("node_type", "ids")
    NODE_TYPE_FIELD_NUMBER: _ClassVar[int]
    IDS_FIELD_NUMBER: _ClassVar[int]
    node_type: NodeType
    ids: Tensor
    def __init__(self, node_type: _Optional[_Union[NodeType, _Mapping]] = ..., ids: _Optional[_Union[Tensor, _Mapping]] = ...) -> None: ...

class NodeCounts(_message.Message):
    __slots__ = ("node_type", "counts")
    NODE_TYPE_FIELD_NUMBER: _ClassVar[int]
    COUNTS_FIELD_NUMBER: _ClassVar[int]
    node_type: NodeType
    counts: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, node_type: _Optional[_Union[NodeType, _Mapping]] = ..., counts: _Optional[_Iterable[int]] = ...) -> None: ...

class EdgeCounts(_message.Message):
    __slots__ = ("edge_type", "counts")
    EDGE_TYPE_FIELD_NUMBER: _ClassVar[int]
    COUNTS_FIELD_NUMBER: _ClassVar[int]
    edge_type: EdgeType
    counts: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, edge_type: _Optional[_Union[EdgeType, _Mapping]] = ..., counts: _Optional[_Iterable[int]] = ...) -> None: ...
