from . import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ListTensorAttrsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListTensorAttrsResponse(_message.Message):
    __slots__ = ("attrs",)
    ATTRS_FIELD_NUMBER: _ClassVar[int]
    attrs: _containers.RepeatedCompositeFieldContainer[_common_pb2.TensorSchema]
    def __init__(self, attrs: _Optional[_Iterable[_Union[_common_pb2.TensorSchema, _Mapping]]] = ...) -> None: ...

class GetTensorSizeRequest(_message.Message):
    __slots__ = ("key",)
    KEY_FIELD_NUMBER: _ClassVar[int]
    key: _common_pb2.TensorAttrKey
    def __init__(self, key: _Optional[_Union[_common_pb2.TensorAttrKey, _Mapping]] = ...) -> None: ...

class GetTensorSizeResponse(_message.Message):
    __slots__ = ("found", "shape")
    FOUND_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    found: bool
    shape: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, found: _Optional[bool] = ..., shape: _Optional[_Iterable[int]] = ...) -> None: ...

class RowQuery(_message.Message):
    __slots__ = ("group", "attr_names", "index", "edge_group")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    ATTR_NAMES_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    EDGE_GROUP_FIELD_NUMBER: _ClassVar[int]
    group: _common_pb2.NodeType
    attr_names: _containers.RepeatedScalarFieldContainer[str]
    index: _common_pb2.Tensor
    edge_group: _common_pb2.EdgeType
    def __init__(self, group: _Optional[_Union[_common_pb2.NodeType, _Mapping]] = ..., attr_names: _Optional[_Iterable[str]] = ..., index: _Optional[_Union[_common_pb2.Tensor, _Mapping]] = ..., edge_group: _Optional[_Union[_common_pb2.EdgeType, _Mapping]] = ...) -> None: ...

class MultiGetRequest(_message.Message):
    __slots__ = ("queries",)
    QUERIES_FIELD_NUMBER: _ClassVar[int]
    queries: _containers.RepeatedCompositeFieldContainer[RowQuery]
    def __init__(self, queries: _Optional[_Iterable[_Union[RowQuery, _Mapping]]] = ...) -> None: ...

class MultiGetResponse(_message.Message):
    __slots__ = ("tensors",)
    TENSORS_FIELD_NUMBER: _ClassVar[int]
    tensors: _containers.RepeatedCompositeFieldContainer[_common_pb2.Tensor]
    def __init__(self, tensors: _Optional[_Iterable[_Union[_common_pb2.Tensor, _Mapping]]] = ...) -> None: ...

class GetTensorRequest(_message.Message):
    __slots__ = ("key", "chunk_bytes")
    KEY_FIELD_NUMBER: _ClassVar[int]
    CHUNK_BYTES_FIELD_NUMBER: _ClassVar[int]
    key: _common_pb2.TensorAttrKey
    chunk_bytes: int
    def __init__(self, key: _Optional[_Union[_common_pb2.TensorAttrKey, _Mapping]] = ..., chunk_bytes: _Optional[int] = ...) -> None: ...

class PutRequest(_message.Message):
    __slots__ = ("key", "all_rows", "index", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    ALL_ROWS_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: _common_pb2.TensorAttrKey
    all_rows: bool
    index: _common_pb2.Tensor
    value: _common_pb2.Tensor
    def __init__(self, key: _Optional[_Union[_common_pb2.TensorAttrKey, _Mapping]] = ..., all_rows: _Optional[bool] = ..., index: _Optional[_Union[_common_pb2.Tensor, _Mapping]] = ..., value: _Optional[_Union[_common_pb2.Tensor, _Mapping]] = ...) -> None: ...

class PutResponse(_message.Message):
    __slots__ = ("written",)
    WRITTEN_FIELD_NUMBER: _ClassVar[int]
    written: bool
    def __init__(self, written: _Optional[bool] = ...) -> None: ...

class RemoveRequest(_message.Message):
    __slots__ = ("key",)
    KEY_FIELD_NUMBER: _ClassVar[int]
    key: _common_pb2.TensorAttrKey
    def __init__(self, key: _Optional[_Union[_common_pb2.TensorAttrKey, _Mapping]] = ...) -> None: ...

class RemoveResponse(_message.Message):
    __slots__ = ("removed",)
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    removed: bool
    def __init__(self, removed: _Optional[bool] = ...) -> None: ...
