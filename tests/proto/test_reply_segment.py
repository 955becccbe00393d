"""Reply segments: arrays placed in shared memory decode exactly; bad segments are refused by reason."""
from __future__ import annotations

import fcntl
import os

import numpy as np
import pytest
import torch

from gnnstore.proto import codec, graph_pb2
from gnnstore.proto.errors import InvalidRequestError
from gnnstore.proto.reply_segment import (
    ALIGNMENT,
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
    message = codec.tensor_to_proto(tensor, writer(segment))
    assert message.HasField("shared") and not message.data
    assert message.shared.offset % ALIGNMENT == 0
    back = codec.tensor_from_proto(message, shared=shared(segment))
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
    rows = out.empty((4, 3), dtype=torch.float32)
    rows.copy_(torch.arange(12.0).reshape(4, 3))
    placed = out.placed_bytes
    message = codec.tensor_to_proto(rows, out)
    assert out.placed_bytes == placed  # already in the segment: referenced, not copied
    assert torch.equal(codec.tensor_from_proto(message, shared=shared(segment)), torch.arange(12.0).reshape(4, 3))
    decoded = codec.ids_from_proto(ids, shared=shared(segment))
    assert torch.equal(decoded, torch.tensor([5, 0, 1 << 20]))
    assert decoded.data_ptr() == segment.view.ctypes.data + ids.shared.offset


def test_what_does_not_fit_travels_inline_and_the_needed_size_is_reported() -> None:
    small = ReplySegment(256)
    out = writer(small)
    fits, too_big = torch.arange(10.0), torch.arange(100.0)
    first, second = codec.tensor_to_proto(fits, out), codec.tensor_to_proto(too_big, out)
    assert first.HasField("shared") and not second.HasField("shared") and second.data
    assert torch.equal(codec.tensor_from_proto(second, shared=shared(small)), too_big)
    built_elsewhere = out.empty((100,), dtype=torch.float32)  # does not fit either
    codec.tensor_to_proto(built_elsewhere, out)
    use = out.use()
    assert use.used and use.placed_bytes == 40
    assert use.needed_bytes == 64 + 448 + 448  # each array counted once, aligned


def test_a_slice_without_a_segment_or_outside_it_is_refused(segment: ReplySegment) -> None:
    message = codec.tensor_to_proto(torch.arange(4.0), writer(segment))
    with pytest.raises(InvalidRequestError, match="none was offered"):
        codec.tensor_from_proto(message)
    message.shared.offset = segment.size - 8
    with pytest.raises(InvalidRequestError, match="outside"):
        codec.tensor_from_proto(message, "rows", shared=shared(segment))
    message.shared.offset = 2
    with pytest.raises(InvalidRequestError, match="offset 2 .* not a multiple of 4"):
        codec.tensor_from_proto(message, "rows", shared=shared(segment))


def test_segments_that_are_not_the_clients_are_refused(segment: ReplySegment) -> None:
    wrong_inode = graph_pb2.ReplySegment()
    wrong_inode.CopyFrom(segment.message)
    wrong_inode.inode += 1
    with pytest.raises(SegmentRefused, match="not the client's reply segment"):
        open_for_writing(wrong_inode)
    missing = graph_pb2.ReplySegment(pid=segment.message.pid, fd=1 << 20, inode=1, size=64)
    with pytest.raises(SegmentRefused, match="cannot open"):
        open_for_writing(missing)
    too_big = graph_pb2.ReplySegment()
    too_big.CopyFrom(segment.message)
    too_big.size = segment.size * 2
    with pytest.raises(SegmentRefused, match="not the .* announced"):
        open_for_writing(too_big)


def test_an_unsealed_memfd_is_refused() -> None:
    fd = os.memfd_create("gnnstore-reply", os.MFD_ALLOW_SEALING)
    try:
        os.ftruncate(fd, 4096)
        message = graph_pb2.ReplySegment(pid=os.getpid(), fd=fd, inode=os.fstat(fd).st_ino, size=4096)
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
