"""A sampling reply's payload: the wire messages parse as the message plus its arrays, exactly,
whole or in parts."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from gnnstore.proto import graph_pb2
from gnnstore.proto.codec import ids_from_proto, ids_to_proto, tensor_from_proto, tensor_to_proto
from gnnstore.proto.reply_payload import (
    PayloadWriter,
    ReceivedSample,
    ReplyWithPayload,
    join_sample_parts,
    read_sample_part,
)
from gnnstore.proto.reply_segment import ALIGNMENT


def test_arrays_travel_after_the_message_aligned_and_decode_as_views() -> None:
    writer = PayloadWriter()
    ids = torch.tensor([5, 1, 2**20, 7])
    rows = torch.randn(3, 5)  # 60 bytes: the next array starts after padding
    flags = torch.tensor([True, False, True])
    message = graph_pb2.SampleResponse(hetero=True)
    message.node.add(ids=ids_to_proto(ids, writer))
    message.features.add(rows=[tensor_to_proto(rows, writer), tensor_to_proto(flags, writer)])

    (wire,) = ReplyWithPayload(message, writer).wire_messages()
    parsed = graph_pb2.SampleResponse.FromString(wire)
    assert parsed.hetero and not parsed.node[0].ids.data  # the bytes are not in the message
    assert parsed.node[0].ids.dtype == "int32"  # ids that fit narrow, as on the socket
    payload = memoryview(bytearray(parsed.payload))
    assert len(payload) == writer.size
    assert torch.equal(ids_from_proto(parsed.node[0].ids, shared=payload), ids)
    assert torch.equal(tensor_from_proto(parsed.features[0].rows[0], shared=payload), rows)
    assert torch.equal(tensor_from_proto(parsed.features[0].rows[1], shared=payload), flags)
    offsets = [offset for offset, _ in writer.arrays]
    assert all(o % ALIGNMENT == 0 for o in offsets) and offsets == sorted(offsets)
    padding = np.frombuffer(payload, dtype=np.uint8)[offsets[1] + rows.numel() * 4 : offsets[2]]
    assert padding.size and not padding.any()  # never stale server memory


def test_a_reply_without_arrays_has_an_empty_payload() -> None:
    message = graph_pb2.SampleResponse(hetero=False)
    (wire,) = ReplyWithPayload(message, PayloadWriter()).wire_messages()
    assert graph_pb2.SampleResponse.FromString(wire) == message


def test_the_client_reads_the_message_and_a_writable_payload_apart() -> None:
    writer = PayloadWriter()
    rows = torch.randn(300, 7)
    message = graph_pb2.SampleResponse(hetero=False)
    message.node.add(ids=ids_to_proto(torch.arange(300) * 3, writer))
    message.features.add(rows=[tensor_to_proto(rows, writer)])
    message.reply_segment.refused = "no segment"  # fields of every wire type before the payload

    received = _received(ReplyWithPayload(message, writer))
    assert received.message == message and not received.message.payload
    assert not received.payload.readonly and len(received.payload) == writer.size
    decoded = tensor_from_proto(received.message.features[0].rows[0], shared=received.payload)
    assert torch.equal(decoded, rows)
    decoded[0, 0] = 1.0  # the batch's tensors may be written to
    assert torch.equal(ids_from_proto(received.message.node[0].ids, shared=received.payload), torch.arange(300) * 3)


def test_a_reply_with_an_empty_payload_reads_as_none() -> None:
    message = graph_pb2.SampleResponse(hetero=True)
    received = _received(ReplyWithPayload(message, PayloadWriter()))
    assert received.message == message and received.payload is None


def test_a_reply_without_payload_reads_whole() -> None:
    message = graph_pb2.SampleResponse(hetero=True)
    message.node.add(ids=ids_to_proto(torch.arange(5)))
    received = join_sample_parts([read_sample_part(message.SerializeToString())])
    assert received.message == message and received.payload is None


@pytest.mark.parametrize("wire", [b"\x0a\x80", b"\x0a\x05ab", b"\x0b", b"\x08" + b"\xff" * 11])
def test_malformed_reply_bytes_raise_value_error(wire: bytes) -> None:
    with pytest.raises(ValueError):
        read_sample_part(wire)


@pytest.mark.parametrize("part_bytes", [1, 64, 100, 1000, 1 << 20])
def test_a_payload_split_into_parts_joins_to_the_same_bytes(part_bytes: int) -> None:
    writer = PayloadWriter()
    rows, ids = torch.randn(37, 3), torch.arange(11) * 5  # 444 bytes, then padding, then 44
    message = graph_pb2.SampleResponse(hetero=True)
    message.features.add(rows=[tensor_to_proto(rows, writer)])
    message.node.add(ids=ids_to_proto(ids, writer))
    reply = ReplyWithPayload(message, writer)

    parts = list(reply.wire_messages(part_bytes))
    assert len(parts) == -(-writer.size // part_bytes)
    whole = join_sample_parts([read_sample_part(wire) for wire in reply.wire_messages(writer.size)])
    joined = join_sample_parts([read_sample_part(wire) for wire in parts])
    assert joined.message == message and bytes(joined.payload) == bytes(whole.payload)
    assert torch.equal(tensor_from_proto(joined.message.features[0].rows[0], shared=joined.payload), rows)
    assert torch.equal(ids_from_proto(joined.message.node[0].ids, shared=joined.payload), ids)
    assert not joined.payload.readonly
    for wire in parts[1:]:  # a continuation is a valid SampleResponse holding only payload
        assert graph_pb2.SampleResponse.FromString(wire).ListFields()[0][0].name == "payload"


def test_a_continuation_with_other_fields_or_no_message_at_all_is_refused() -> None:
    first = ReceivedSample(graph_pb2.SampleResponse(hetero=True), memoryview(b"ab"))
    with pytest.raises(ValueError, match="besides its payload"):
        join_sample_parts([first, ReceivedSample(graph_pb2.SampleResponse(hetero=True), memoryview(b"c"))])
    with pytest.raises(ValueError, match="before its first message"):
        join_sample_parts([])


def _received(reply: ReplyWithPayload) -> ReceivedSample:
    return join_sample_parts([read_sample_part(wire) for wire in reply.wire_messages()])
