from . import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Keys(_message.Message):
    __slots__ = ("ints", "strs", "mixed")
    INTS_FIELD_NUMBER: _ClassVar[int]
    STRS_FIELD_NUMBER: _ClassVar[int]
    MIXED_FIELD_NUMBER: _ClassVar[int]
    ints: _common_pb2.Tensor
    strs: StringKeys
    mixed: MixedKeys
    def __init__(self, ints: _Optional[_Union[_common_pb2.Tensor, _Mapping]] = ..., strs: _Optional[_Union[StringKeys, _Mapping]] = ..., mixed: _Optional[_Union[MixedKeys, _Mapping]] = ...) -> None: ...

class StringKeys(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, values: _Optional[_Iterable[str]] = ...) -> None: ...

class Key(_message.Message):
    __slots__ = ("int_key", "str_key")
    INT_KEY_FIELD_NUMBER: _ClassVar[int]
    STR_KEY_FIELD_NUMBER: _ClassVar[int]
    int_key: int
    str_key: str
    def __init__(self, int_key: _Optional[int] = ..., str_key: _Optional[str] = ...) -> None: ...

class MixedKeys(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedCompositeFieldContainer[Key]
    def __init__(self, values: _Optional[_Iterable[_Union[Key, _Mapping]]] = ...) -> None: ...

class ToIdsRequest(_message.Message):
    __slots__ = ("node_type", "keys")
    NODE_TYPE_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    node_type: _common_pb2.NodeType
    keys: Keys
    def __init__(self, node_type: _Optional[_Union[_common_pb2.NodeType, _Mapping]] = ..., keys: _Optional[_Union[Keys, _Mapping]] = ...) -> None: ...

class ToIdsResponse(_message.Message):
    __slots__ = ("ids",)
    IDS_FIELD_NUMBER: _ClassVar[int]
    ids: _common_pb2.Tensor
    def __init__(self, ids: _Optional[_Union[_common_pb2.Tensor, _Mapping]] = ...) -> None: ...

class ToKeysRequest(_message.Message):
    __slots__ = ("node_type", "ids")
    NODE_TYPE_FIELD_NUMBER: _ClassVar[int]
    IDS_FIELD_NUMBER: _ClassVar[int]
    node_type: _common_pb2.NodeType
    ids: _common_pb2.Tensor
    def __init__(self, node_type: _Optional[_Union[_common_pb2.NodeType, _Mapping]] = ..., ids: _Optional[_Union[_common_pb2.Tensor, _Mapping]] = ...) -> None: ...

class ToKeysResponse(_message.Message):
    __slots__ = ("keys",)
    KEYS_FIELD_NUMBER: _ClassVar[int]
    keys: Keys
    def __init__(self, keys: _Optional[_Union[Keys, _Mapping]] = ...) -> None: ...
