"""A sampling reply's arrays as one payload after the message, copied once and without the GIL.

A reply through the socket used to carry each array as a protobuf ``bytes`` field: the server
copied every array three times while holding the GIL (``tobytes``, into the message, into the
serialised bytes), each copy one long C call that stalled every other request's Python for
its length (~30 ms for a 120 MB reply). When a request accepts it (``accept_payload``) and
offered no reply segment, ``PayloadWriter`` stands in for the segment's writer: ``place``
only notes each array and its 64-byte aligned offset, the Tensor messages point there as they
would into a segment (``shared``), and ``ReplyWithPayload.serialize`` writes the message and
then the arrays straight into the one ``bytes`` object gRPC sends, with ``ctypes.memmove``
(which releases the GIL). ``SampleResponse.payload`` is the last field on the wire.

On the client, ``read_sample_reply`` (the sampling methods' response deserializer, wired in by
``graph_stub``) parses only the message before the payload and copies the payload once into
a writable buffer the batch's tensors view. Parsing the payload as a protobuf field, reading
it and copying it again cost ~7 ms of the trainer's CPU for a 6 MB reply (upb, one thread).
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass

import grpc
import numpy as np
from google.protobuf.message import Message

from . import graph_pb2, graph_pb2_grpc
from .reply_segment import aligned

PAYLOAD_FIELD = graph_pb2.SampleResponse.DESCRIPTOR.fields_by_name["payload"].number
"""``SampleResponse.payload``'s field number, read from the stubs so the two never drift."""

_new_bytes = ctypes.pythonapi.PyBytes_FromStringAndSize
_new_bytes.restype = ctypes.py_object
_new_bytes.argtypes = (ctypes.c_void_p, ctypes.c_ssize_t)


class PayloadWriter:
    """Notes a reply's arrays at 64-byte aligned offsets of the payload; copies nothing."""

    narrow_ids = True
    """Ids travel as int32 where they fit: payload bytes cross the network."""

    def __init__(self) -> None:
        self.arrays: list[tuple[int, np.ndarray]] = []
        self.size = 0

    def empty(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """An ordinary array: it joins the payload when it is placed."""
        return np.empty(shape, dtype)

    def ids(self, n: int) -> np.ndarray:
        """An ordinary int64 array: it joins the payload when it is placed."""
        return np.empty(n, np.int64)

    def free_bytes(self) -> int:
        """0: rows aligned to the batch's nodes are for a segment the client's cache fills."""
        return 0

    def place(self, raw: np.ndarray) -> int:
        """The offset ``raw`` (contiguous bytes, kept alive until serialised) will have."""
        offset = aligned(self.size)
        self.arrays.append((offset, raw))
        self.size = offset + raw.size
        return offset


@dataclass
class ReplyWithPayload:
    """What a sampling call returns to gRPC when its arrays travel in a payload."""

    message: Message
    payload: PayloadWriter

    def serialize(self) -> bytes:
        """The message's wire bytes followed by the payload field."""
        head = self.message.SerializeToString() + _field_prefix(PAYLOAD_FIELD, self.payload.size)
        out = _new_bytes(None, len(head) + self.payload.size)  # contents uninitialised: filled here
        base = ctypes.cast(ctypes.c_char_p(out), ctypes.c_void_p).value
        ctypes.memmove(base, head, len(head))
        end = 0
        for offset, raw in self.payload.arrays:
            ctypes.memset(base + len(head) + end, 0, offset - end)  # padding: never stale memory
            ctypes.memmove(base + len(head) + offset, raw.ctypes.data, raw.size)
            end = offset + raw.size
        return out


def _field_prefix(field: int, length: int) -> bytes:
    """The tag and length of a length-delimited field."""
    return _varint(field << 3 | 2) + _varint(length)


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


@dataclass
class ReceivedSample:
    """A sampling reply as the client receives it: the message and the payload apart."""

    message: graph_pb2.SampleResponse
    payload: memoryview | None
    """The payload's bytes, writable (the batch's tensors view it); None when the reply had none."""


def read_sample_reply(data: bytes) -> ReceivedSample:
    """Split a ``SampleResponse``'s wire bytes into the message without its payload and the payload.

    Raises:
        ValueError, DecodeError: the bytes are not a well-formed message (gRPC reports either as
            the call's error).
    """
    view = memoryview(data)
    position = 0
    while position < len(data):
        field_start = position
        key, position = _read_varint(view, position)
        field, wire_type = key >> 3, key & 7
        if wire_type == 2:
            length, position = _read_varint(view, position)
            end = position + length
            if end > len(data):
                raise ValueError("a field runs past the end of the reply")
            if field == PAYLOAD_FIELD:
                message = graph_pb2.SampleResponse.FromString(bytes(view[:field_start]) + bytes(view[end:]))
                return ReceivedSample(message, memoryview(bytearray(view[position:end])) if length else None)
            position = end
        elif wire_type == 0:
            _, position = _read_varint(view, position)
        elif wire_type in _FIXED_SIZES:
            position += _FIXED_SIZES[wire_type]
        else:
            raise ValueError(f"unknown wire type {wire_type} in the reply")
    return ReceivedSample(graph_pb2.SampleResponse.FromString(data), None)


def graph_stub(channel: grpc.Channel) -> graph_pb2_grpc.GraphServiceStub:
    """The GraphService stub, its sampling methods answering ``ReceivedSample``."""
    stub = graph_pb2_grpc.GraphServiceStub(channel)
    for method, request in (
        ("SampleFromNodes", graph_pb2.SampleFromNodesRequest), ("SampleFromEdges", graph_pb2.SampleFromEdgesRequest),
    ):
        setattr(stub, method, channel.unary_unary(
            f"/gnnstore.v1.GraphService/{method}", request_serializer=request.SerializeToString,
            response_deserializer=read_sample_reply, _registered_method=True,
        ))
    return stub


_FIXED_SIZES = {1: 8, 5: 4}
"""Bytes of the fixed-width wire types (64-bit, 32-bit)."""


def _read_varint(view: memoryview, position: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if position >= len(view) or shift > 63:
            raise ValueError("a malformed varint in the reply")
        byte = view[position]
        position += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, position
