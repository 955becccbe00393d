"""Recycled batch memory: right tensors, and a block is reused only once nothing refers to it."""
from __future__ import annotations

import gc
import os

import pytest
import torch

from gnnstore.client.batch_buffers import MIN_BYTES, BatchBuffers

ROWS = MIN_BYTES // 400 + 1  # rows of 100 float32: just above the pooled size


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.bool, torch.int64])
def test_tensors_have_the_asked_shape_and_dtype(dtype: torch.dtype) -> None:
    pool = BatchBuffers()
    tensor = pool.empty((ROWS, 100), dtype=dtype)
    assert tensor.shape == (ROWS, 100) and tensor.dtype == dtype and tensor.is_contiguous()
    tensor.fill_(1)
    assert bool(tensor.all())
    small = pool.empty((3, 4), dtype=dtype)
    assert small.shape == (3, 4) and small.dtype == dtype


def test_a_block_comes_back_only_when_every_view_and_export_is_gone() -> None:
    pool = BatchBuffers()
    first = pool.empty((ROWS, 100), dtype=torch.float32)
    address = first.data_ptr()
    first.fill_(7)
    view, array = first[:10], first.numpy()
    del first
    gc.collect()
    other = pool.empty((ROWS, 100), dtype=torch.float32)
    assert other.data_ptr() != address  # a view still holds the block
    other.fill_(0)
    assert bool((view == 7).all()) and bool((array == 7).all())
    del view, array, other
    gc.collect()
    assert pool.empty((ROWS, 100), dtype=torch.float32).data_ptr() == address


def test_a_block_serves_sizes_up_to_twice_smaller_and_idle_blocks_are_bounded() -> None:
    pool = BatchBuffers(kept_blocks=2)
    address = pool.empty((ROWS + 50, 100), dtype=torch.float32).data_ptr()
    assert pool.empty((ROWS, 100), dtype=torch.float32).data_ptr() == address  # a smaller batch fits
    held = [pool.empty((ROWS, 100), dtype=torch.float32) for _ in range(4)]
    del held
    assert len(pool._free) == 2


def test_a_forked_child_starts_with_an_empty_pool() -> None:
    from gnnstore.client.batch_buffers import BATCH_BUFFERS

    BATCH_BUFFERS.empty((ROWS, 100), dtype=torch.float32)  # returns at once: one idle block
    assert BATCH_BUFFERS._free
    pid = os.fork()
    if pid == 0:
        os._exit(0 if not BATCH_BUFFERS._free else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
