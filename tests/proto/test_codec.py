"""Tensors and PyG type keys survive the wire exactly; malformed input is refused by name."""
from __future__ import annotations

import pytest
import torch

from gnnstore.common.dtypes import ITEMSIZE
from gnnstore.common.errors import InvalidRequestError
from gnnstore.proto import codec, tensor_codec
from gnnstore.proto.common_pb2 import EdgeType, NodeType, Tensor


@pytest.mark.parametrize("dtype", [getattr(torch, name) for name in sorted(ITEMSIZE)])
def test_tensor_round_trip_is_bit_exact(dtype: torch.dtype) -> None:
    source = (torch.arange(24) % 7 - 3).reshape(2, 3, 4)
    tensor = source.to(dtype)
    back = tensor_codec.tensor_from_proto(tensor_codec.tensor_to_proto(tensor))
    assert back.dtype == dtype
    assert back.shape == tensor.shape
    assert torch.equal(back, tensor)


def test_non_contiguous_and_scalar_and_empty_tensors() -> None:
    x = torch.randn(5, 4).t()
    assert torch.equal(tensor_codec.tensor_from_proto(tensor_codec.tensor_to_proto(x)), x)
    scalar = torch.tensor(3.5)
    assert torch.equal(tensor_codec.tensor_from_proto(tensor_codec.tensor_to_proto(scalar)), scalar)
    empty = torch.empty(0, 7)
    back = tensor_codec.tensor_from_proto(tensor_codec.tensor_to_proto(empty))
    assert back.shape == (0, 7)


def test_wire_bytes_are_little_endian_raw() -> None:
    message = tensor_codec.tensor_to_proto(torch.tensor([1, 256], dtype=torch.int32))
    assert message.dtype == "int32"
    assert message.data == b"\x01\x00\x00\x00\x00\x01\x00\x00"


def test_decoded_tensor_is_writable_and_independent() -> None:
    message = tensor_codec.tensor_to_proto(torch.zeros(3))
    back = tensor_codec.tensor_from_proto(message)
    back += 1
    assert torch.equal(tensor_codec.tensor_from_proto(message), torch.zeros(3))


def test_byte_count_mismatch_is_refused() -> None:
    message = Tensor(dtype="float32", shape=[3, 4], data=b"\x00" * 40)
    with pytest.raises(InvalidRequestError, match="needs 48 bytes, got 40"):
        tensor_codec.tensor_from_proto(message, "MultiGet index")


def test_unknown_dtype_is_refused() -> None:
    with pytest.raises(InvalidRequestError, match="unknown tensor dtype 'float8'"):
        tensor_codec.tensor_from_proto(Tensor(dtype="float8", shape=[1], data=b"\x00"))


def test_ids_must_be_integer_and_one_dimensional() -> None:
    assert tensor_codec.ids_from_proto(tensor_codec.tensor_to_proto(torch.tensor([3, 1], dtype=torch.int32))).dtype == torch.long
    with pytest.raises(InvalidRequestError, match="seeds must be int64 or int32"):
        tensor_codec.ids_from_proto(tensor_codec.tensor_to_proto(torch.tensor([1.0])), "seeds")
    with pytest.raises(InvalidRequestError, match="must be 1-D"):
        tensor_codec.ids_from_proto(tensor_codec.tensor_to_proto(torch.zeros(2, 2, dtype=torch.long)))


@pytest.mark.parametrize("node_type", [None, "paper"])
def test_node_type_round_trip(node_type: str | None) -> None:
    assert codec.node_type_from_proto(codec.node_type_to_proto(node_type)) == node_type


@pytest.mark.parametrize("edge_type", [None, ("author", "writes", "paper")])
def test_edge_type_decodes_to_tuple_or_none(edge_type: tuple | None) -> None:
    back = codec.edge_type_from_proto(codec.edge_type_to_proto(edge_type))
    assert back == edge_type
    assert back is None or type(back) is tuple


def test_list_edge_type_is_encoded_as_tuple() -> None:
    back = codec.edge_type_from_proto(codec.edge_type_to_proto(["a", "to", "b"]))
    assert back == ("a", "to", "b") and type(back) is tuple


@pytest.mark.parametrize(
    "message, fragment",
    [
        (NodeType(), "no name and is not marked homogeneous"),
        (NodeType(homogeneous=True, name="paper"), "marked homogeneous"),
    ],
)
def test_inconsistent_node_types_are_refused(message: NodeType, fragment: str) -> None:
    with pytest.raises(InvalidRequestError, match=fragment):
        codec.node_type_from_proto(message)


def test_inconsistent_edge_types_are_refused() -> None:
    with pytest.raises(InvalidRequestError, match="needs src, rel and dst"):
        codec.edge_type_from_proto(EdgeType(src="a", dst="b"))
    with pytest.raises(InvalidRequestError, match="is a \\(src, rel, dst\\) tuple"):
        codec.edge_type_to_proto(("a", "b"))
    with pytest.raises(InvalidRequestError, match="non-empty str or None"):
        codec.node_type_to_proto("")


def test_ids_travel_as_int32_when_they_fit_and_decode_as_writable_int64() -> None:
    small, large = torch.tensor([-(2**31), 5, 2**31 - 1]), torch.tensor([0, 2**31])
    below, strided = torch.tensor([7, -(2**31) - 1]), torch.arange(20)[::3]
    assert codec.ids_to_proto(small).dtype == "int32" and codec.ids_to_proto(strided).dtype == "int32"
    assert codec.ids_to_proto(large).dtype == "int64" and codec.ids_to_proto(below).dtype == "int64"
    for ids in (small, large, below, strided, torch.tensor([], dtype=torch.long)):
        decoded = tensor_codec.ids_from_proto(codec.ids_to_proto(ids))
        assert decoded.dtype == torch.long and torch.equal(decoded, ids)
        decoded.add_(1)  # writable, and not a view of the message


def test_attr_name_none_travels_as_the_empty_string() -> None:
    for name in (None, "x"):
        key = codec.attr_key_to_proto("paper", name)
        assert codec.attr_key_from_proto(key) == ("paper", name)
    assert codec.attr_key_to_proto(None, None).attr_name == ""
    for bad in ("", 3):
        with pytest.raises(InvalidRequestError, match="attr_name must be a non-empty str or None"):
            codec.attr_key_to_proto("paper", bad)


@pytest.mark.parametrize("group", [None, "paper", ("a", "to", "b"), (None, None)])
def test_feature_groups_round_trip_node_types_and_edge_groups(group: object) -> None:
    key = codec.attr_key_to_proto(group, "edge_attr")
    assert key.HasField("edge_group") == isinstance(group, tuple)
    assert codec.attr_key_from_proto(key) == (group, "edge_attr")


def test_a_group_with_both_a_node_type_and_an_edge_type_is_refused() -> None:
    key = codec.attr_key_to_proto(("a", "to", "b"), "w")
    key.group.CopyFrom(NodeType(name="a"))
    with pytest.raises(InvalidRequestError, match="a node type or an edge type, not both"):
        codec.attr_key_from_proto(key)
    with pytest.raises(InvalidRequestError, match="feature group"):
        codec.attr_key_to_proto(("a", "b"), "w")
