"""Reply segments: arrays placed in shared memory decode exactly; bad segments are refused by reason."""
from __future__ import annotations

import fcntl
import os

import numpy as np
import pytest
import torch

from gnnstore.common.errors import InvalidRequestError
from gnnstore.proto import codec, graph_pb2, tensor_codec
from gnnstore.proto.reply_segment import (
    ALIGNMENT,
    HEADER_BYTES,
    NONCE_BYTES,
    ReplySegment,
    ReplyWriter,
    SegmentRefused,
    open_for_writing,
)


@pytest.fixture
def segment() -> ReplySegment:
    made = ReplySegment(1 << 16)
    yield made
    made.close()


def writer(segment: ReplySegment) -> ReplyWriter:
    """The server's side of ``segment``, opened as a server opens it (through /proc)."""
    return ReplyWriter(open_for_writing(segment.message))


def shared(segment: ReplySegment) -> memoryview:
    """The segment's bytes as the client decodes from them."""
    return memoryview(segment.view)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.bool, torch.int64])
def test_tensors_in_the_segment_decode_bit_exact_as_writable_views_of_it(
    segment: ReplySegment, dtype: torch.dtype
) -> None:
    tensor = (torch.arange(60) % 7 - 3).reshape(3, 20).to(dtype)
    message = tensor_codec.tensor_to_proto(tensor, writer(segment))
    assert message.HasField("shared") and not message.data
    assert message.shared.offset % ALIGNMENT == 0
    back = tensor_codec.tensor_from_proto(message, shared=shared(segment))
    assert back.dtype == dtype and torch.equal(back, tensor)
    assert back.data_ptr() == segment.view.ctypes.data + message.shared.offset  # no copy
    # Its storage is its own bytes, not the whole segment: pickling or saving it moves only those.
    assert back.untyped_storage().nbytes() == tensor.numel() * tensor.element_size()
    back[0, 0] = back[1, 0]  # a trainer may change its batch in place


def test_ids_stay_int64_inside_the_segment_and_rows_built_there_are_not_copied(segment: ReplySegment) -> None:
    out = writer(segment)
    ids = codec.ids_to_proto(torch.tensor([5, 0, 1 << 20]), out)
    assert ids.dtype == "int64" and ids.HasField("shared")
    assert codec.ids_to_proto(torch.tensor([5, 0, 1 << 20])).dtype == "int32"  # inline: narrowed
    rows = out.empty((4, 3), np.float32)
    rows[:] = np.arange(12.0).reshape(4, 3)
    placed = out.placed_bytes
    message = codec.array_to_proto(rows, out)
    assert out.placed_bytes == placed  # already in the segment: referenced, not copied
    assert torch.equal(tensor_codec.tensor_from_proto(message, shared=shared(segment)), torch.arange(12.0).reshape(4, 3))
    decoded = tensor_codec.ids_from_proto(ids, shared=shared(segment))
    assert torch.equal(decoded, torch.tensor([5, 0, 1 << 20]))
    assert decoded.data_ptr() == segment.view.ctypes.data + ids.shared.offset


def test_what_does_not_fit_travels_inline_and_the_needed_size_is_reported() -> None:
    small = ReplySegment(256)
    out = writer(small)
    fits, too_big = torch.arange(10.0), torch.arange(100.0)
    first, second = tensor_codec.tensor_to_proto(fits, out), tensor_codec.tensor_to_proto(too_big, out)
    assert first.HasField("shared") and not second.HasField("shared") and second.data
    assert torch.equal(tensor_codec.tensor_from_proto(second, shared=shared(small)), too_big)
    built_elsewhere = out.empty((100,), np.float32)  # does not fit either
    codec.array_to_proto(built_elsewhere, out)
    use = out.use()
    assert use.used and use.placed_bytes == 40
    assert use.needed_bytes == HEADER_BYTES + 64 + 448 + 448  # the header, then each array once, aligned


def test_a_slice_without_a_segment_or_outside_it_is_refused(segment: ReplySegment) -> None:
    message = tensor_codec.tensor_to_proto(torch.arange(4.0), writer(segment))
    with pytest.raises(InvalidRequestError, match="none was offered"):
        tensor_codec.tensor_from_proto(message)
    message.shared.offset = segment.size - 8
    with pytest.raises(InvalidRequestError, match="outside"):
        tensor_codec.tensor_from_proto(message, "rows", shared=shared(segment))
    message.shared.offset = 2
    with pytest.raises(InvalidRequestError, match="offset 2 .* not a multiple of 4"):
        tensor_codec.tensor_from_proto(message, "rows", shared=shared(segment))


def _altered(segment: ReplySegment, **fields: object) -> graph_pb2.ReplySegment:
    message = graph_pb2.ReplySegment()
    message.CopyFrom(segment.message)
    for name, value in fields.items():
        setattr(message, name, value)
    return message


def test_segments_that_are_not_the_clients_are_refused_naming_no_path(segment: ReplySegment) -> None:
    refusals = []
    for message, reason in [
        (_altered(segment, inode=segment.message.inode + 1), "not the client's reply segment"),
        (_altered(segment, fd=1 << 20), "cannot open"),
        (_altered(segment, size=segment.size * 2), "not the .* announced"),
        (_altered(segment, nonce=bytes(NONCE_BYTES)), "nonce is not the segment's"),
        (_altered(segment, nonce=b""), "16-byte nonce"),
        (_altered(segment, size=HEADER_BYTES), "more than 64 bytes"),
    ]:
        with pytest.raises(SegmentRefused, match=reason) as refused:
            open_for_writing(message)
        refusals.append(str(refused.value))
    # A file this process has open that is no memfd: refused without naming its path.
    with open(__file__, "rb") as other:
        stranger = _altered(segment, fd=other.fileno(), inode=os.fstat(other.fileno()).st_ino)
        with pytest.raises(SegmentRefused, match="not the client's reply segment") as refused:
            open_for_writing(stranger)
        refusals.append(str(refused.value))
    for text in refusals:
        assert "/" not in text, text  # no /proc path, no readlink target


def test_a_fifo_named_as_a_segment_is_refused_without_blocking(segment: ReplySegment) -> None:
    read_end, write_end = os.pipe()
    try:
        message = _altered(segment, fd=read_end, inode=os.fstat(read_end).st_ino)
        with pytest.raises(SegmentRefused, match="is not a reply segment"):
            open_for_writing(message)
    finally:
        os.close(read_end)
        os.close(write_end)


def test_the_nonce_lies_in_the_header_the_server_never_writes(segment: ReplySegment) -> None:
    nonce = segment.message.nonce
    assert len(nonce) == NONCE_BYTES and bytes(segment.view[:NONCE_BYTES]) == nonce
    assert ReplySegment(4096).message.nonce != nonce  # random per segment
    out = writer(segment)
    offset, target = out.reserve(8)
    assert offset >= HEADER_BYTES
    target[:] = 255
    out.empty((4,), np.int64).fill(-1)
    assert bytes(segment.view[:NONCE_BYTES]) == nonce


def test_an_unsealed_memfd_is_refused() -> None:
    fd = os.memfd_create("gnnstore-reply", os.MFD_ALLOW_SEALING)
    try:
        os.ftruncate(fd, 4096)
        nonce = os.urandom(NONCE_BYTES)
        os.pwrite(fd, nonce, 0)
        message = graph_pb2.ReplySegment(
            pid=os.getpid(), fd=fd, inode=os.fstat(fd).st_ino, size=4096, nonce=nonce
        )
        with pytest.raises(SegmentRefused, match="not sealed"):
            open_for_writing(message)
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK)
        assert open_for_writing(message).size() == 4096
    finally:
        os.close(fd)


def test_the_server_writes_what_the_client_reads(segment: ReplySegment) -> None:
    out = writer(segment)
    offset, target = out.reserve(5)
    target[:] = np.frombuffer(b"hello", dtype=np.uint8)
    assert bytes(segment.view[offset : offset + 5]) == b"hello"
