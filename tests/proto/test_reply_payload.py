"""A sampling reply's payload: the wire bytes parse as the message plus its arrays, exactly."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from gnnstore.proto import graph_pb2
from gnnstore.proto.codec import ids_to_proto
from gnnstore.proto.reply_payload import PayloadWriter, ReplyWithPayload, read_sample_reply
from gnnstore.proto.reply_segment import ALIGNMENT
from gnnstore.proto.tensor_codec import ids_from_proto, tensor_from_proto, tensor_to_proto


def test_arrays_travel_after_the_message_aligned_and_decode_as_views() -> None:
    writer = PayloadWriter()
    ids = torch.tensor([5, 1, 2**20, 7])
    rows = torch.randn(3, 5)  # 60 bytes: the next array starts after padding
    flags = torch.tensor([True, False, True])
    message = graph_pb2.SampleResponse(hetero=True)
    message.node.add(ids=ids_to_proto(ids, writer))
    message.features.add(rows=[tensor_to_proto(rows, writer), tensor_to_proto(flags, writer)])

    wire = ReplyWithPayload(message, writer).serialize()
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
    wire = ReplyWithPayload(message, PayloadWriter()).serialize()
    assert graph_pb2.SampleResponse.FromString(wire) == message


def test_the_client_reads_the_message_and_a_writable_payload_apart() -> None:
    writer = PayloadWriter()
    rows = torch.randn(300, 7)
    message = graph_pb2.SampleResponse(hetero=False)
    message.node.add(ids=ids_to_proto(torch.arange(300) * 3, writer))
    message.features.add(rows=[tensor_to_proto(rows, writer)])
    message.reply_segment.refused = "no segment"  # fields of every wire type before the payload

    received = read_sample_reply(ReplyWithPayload(message, writer).serialize())
    assert received.message == message and not received.message.payload
    assert not received.payload.readonly and len(received.payload) == writer.size
    decoded = tensor_from_proto(received.message.features[0].rows[0], shared=received.payload)
    assert torch.equal(decoded, rows)
    decoded[0, 0] = 1.0  # the batch's tensors may be written to
    assert torch.equal(ids_from_proto(received.message.node[0].ids, shared=received.payload), torch.arange(300) * 3)


def test_a_reply_with_an_empty_payload_reads_as_none() -> None:
    message = graph_pb2.SampleResponse(hetero=True)
    received = read_sample_reply(ReplyWithPayload(message, PayloadWriter()).serialize())
    assert received.message == message and received.payload is None


def test_a_reply_without_payload_reads_whole() -> None:
    message = graph_pb2.SampleResponse(hetero=True)
    message.node.add(ids=ids_to_proto(torch.arange(5)))
    received = read_sample_reply(message.SerializeToString())
    assert received.message == message and received.payload is None


@pytest.mark.parametrize("wire", [b"\x0a\x80", b"\x0a\x05ab", b"\x0b", b"\x08" + b"\xff" * 11])
def test_malformed_reply_bytes_raise_value_error(wire: bytes) -> None:
    with pytest.raises(ValueError):
        read_sample_reply(wire)
