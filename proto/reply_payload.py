"""A sampling reply streamed as parts: its message, then its arrays in chunks, copied without the GIL.

A reply through the socket used to carry each array as a protobuf ``bytes`` field: the server
copied every array three times while holding the GIL (``tobytes``, into the message, into the
serialised bytes), each copy one long C call that stalled every other request's Python for
its length (~30 ms for a 120 MB reply). When a request accepts it (``accept_payload``) and
offered no reply segment, ``PayloadWriter`` stands in for the segment's writer: ``place``
only notes each array and its 64-byte aligned offset, and the Tensor messages point there as
they would into a segment (``shared``). The sampling RPCs stream ``SampleReplyPart`` s:
``reply_parts`` gives the head (the message) and then the payload in chunks of
``CHUNK_BYTES``, each written straight into the ``bytes`` object gRPC sends with
``ctypes.memmove`` (which releases the GIL). grpcio copies each message once more while
holding the GIL; in chunks of a few MB no such copy stalls the other requests for long.
"""
from __future__ import annotations

import ctypes
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch
from google.protobuf.message import Message
from torch import Tensor

from . import graph_pb2
from .reply_segment import aligned

CHUNK_BYTES = 4 << 20
"""Payload bytes per streamed part."""

_FIELDS = graph_pb2.SampleReplyPart.DESCRIPTOR.fields_by_name
HEAD_FIELD, DATA_FIELD = _FIELDS["head"].number, _FIELDS["data"].number
"""``SampleReplyPart``'s field numbers, read from the stubs so the two never drift."""

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

    def empty(self, shape: tuple[int, ...], *, dtype: torch.dtype) -> Tensor:
        """An ordinary tensor: it joins the payload when it is placed."""
        return torch.empty(shape, dtype=dtype)

    def free_bytes(self) -> int:
        """0: rows aligned to the batch's nodes are for a segment the client's cache fills."""
        return 0

    def place(self, raw: np.ndarray) -> int:
        """The offset ``raw`` (contiguous bytes, kept alive until serialised) will have."""
        offset = aligned(self.size)
        self.arrays.append((offset, raw))
        self.size = offset + raw.size
        return offset


@dataclass(frozen=True)
class SerializedPart:
    """A reply stream's message already in its wire bytes: the server's interceptor sends it as is."""

    data: bytes


@dataclass
class ReplyWithPayload:
    """What a sampling call returns when its arrays travel in a payload."""

    message: Message
    payload: PayloadWriter


def reply_parts(
    reply: graph_pb2.SampleResponse | ReplyWithPayload, chunk_bytes: int = CHUNK_BYTES
) -> Iterator[SerializedPart]:
    """The ``SampleReplyPart`` s of ``reply``: its head, then its payload's chunks, if any."""
    message = reply.message if isinstance(reply, ReplyWithPayload) else reply
    head = message.SerializeToString()
    yield SerializedPart(_field_prefix(HEAD_FIELD, len(head)) + head)
    if isinstance(reply, ReplyWithPayload):
        for start in range(0, reply.payload.size, chunk_bytes):
            yield SerializedPart(_chunk(reply.payload, start, min(start + chunk_bytes, reply.payload.size)))


def _chunk(payload: PayloadWriter, start: int, end: int) -> bytes:
    """The ``data`` part holding the payload's bytes ``[start, end)``; padding is zeroed, never
    stale memory."""
    prefix = _field_prefix(DATA_FIELD, end - start)
    out = _new_bytes(None, len(prefix) + end - start)  # contents uninitialised: filled here
    base = ctypes.cast(ctypes.c_char_p(out), ctypes.c_void_p).value
    ctypes.memmove(base, prefix, len(prefix))
    base += len(prefix) - start  # base + i is payload byte i
    cursor = start
    for offset, raw in payload.arrays:  # in offset order
        low, high = max(offset, start), min(offset + raw.size, end)
        if low >= high:
            continue
        ctypes.memset(base + cursor, 0, low - cursor)
        ctypes.memmove(base + low, raw.ctypes.data + low - offset, high - low)
        cursor = high
    ctypes.memset(base + cursor, 0, end - cursor)
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
