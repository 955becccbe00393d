"""A sampling reply's parts: the head parses as the message, the data parts join into its arrays."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from gnnstore.proto import graph_pb2
from gnnstore.proto.codec import ids_from_proto, ids_to_proto, tensor_from_proto, tensor_to_proto
from gnnstore.proto.reply_payload import CHUNK_BYTES, PayloadWriter, ReplyWithPayload, reply_parts
from gnnstore.proto.reply_segment import ALIGNMENT


def _parts(reply: object, chunk_bytes: int = CHUNK_BYTES) -> list[graph_pb2.SampleReplyPart]:
    return [graph_pb2.SampleReplyPart.FromString(part.data) for part in reply_parts(reply, chunk_bytes)]


@pytest.mark.parametrize("chunk_bytes", [CHUNK_BYTES, 40, 7])  # whole; arrays and padding cut across parts
def test_arrays_travel_after_the_head_aligned_in_chunks_and_decode_as_views(chunk_bytes: int) -> None:
    writer = PayloadWriter()
    ids = torch.tensor([5, 1, 2**20, 7])
    rows = torch.randn(3, 5)  # 60 bytes: the next array starts after padding
    flags = torch.tensor([True, False, True])
    message = graph_pb2.SampleResponse(hetero=True)
    message.node.add(ids=ids_to_proto(ids, writer))
    message.features.add(rows=[tensor_to_proto(rows, writer), tensor_to_proto(flags, writer)])

    head, *data = _parts(ReplyWithPayload(message, writer), chunk_bytes)
    assert head.WhichOneof("part") == "head" and all(d.WhichOneof("part") == "data" for d in data)
    assert [len(d.data) for d in data[:-1]] == [chunk_bytes] * (len(data) - 1)
    parsed = head.head
    assert parsed.hetero and not parsed.node[0].ids.data  # the bytes are not in the message
    assert parsed.node[0].ids.dtype == "int32"  # ids that fit narrow, as on the socket
    payload = memoryview(bytearray(b"".join(d.data for d in data)))
    assert len(payload) == writer.size
    assert torch.equal(ids_from_proto(parsed.node[0].ids, shared=payload), ids)
    assert torch.equal(tensor_from_proto(parsed.features[0].rows[0], shared=payload), rows)
    assert torch.equal(tensor_from_proto(parsed.features[0].rows[1], shared=payload), flags)
    offsets = [offset for offset, _ in writer.arrays]
    assert all(o % ALIGNMENT == 0 for o in offsets) and offsets == sorted(offsets)
    padding = np.frombuffer(payload, dtype=np.uint8)[offsets[1] + rows.numel() * 4 : offsets[2]]
    assert padding.size and not padding.any()  # never stale server memory


def test_a_reply_without_a_payload_is_its_head_alone() -> None:
    message = graph_pb2.SampleResponse(hetero=False)
    message.node.add(ids=ids_to_proto(torch.arange(3)))  # inline bytes: an older client's reply
    assert [p.head for p in _parts(message)] == [message]
    assert [p.head for p in _parts(ReplyWithPayload(message, PayloadWriter()))] == [message]
