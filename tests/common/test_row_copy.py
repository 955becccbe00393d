"""copy_rows / merge_rows / row_words: bit-identical row copies for every dtype and row width."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from gnnstore.common.row_copy import PREFETCH_AHEAD, copy_rows, merge_rows, row_words


@pytest.mark.parametrize(
    ("shape", "dtype"),
    [((50, 100), torch.float32), ((50,), torch.bool), ((50,), torch.int64), ((50, 3), torch.uint8),
     ((50, 7), torch.bfloat16), ((50, 2, 3), torch.float64)],
)
@pytest.mark.parametrize("count", [0, 1, PREFETCH_AHEAD, 3 * PREFETCH_AHEAD + 1])
def test_copies_exactly_the_named_rows(shape: tuple[int, ...], dtype: torch.dtype, count: int) -> None:
    generator = torch.Generator().manual_seed(count)
    high = 2 if dtype == torch.bool else 256  # any bit pattern, NaNs included, but valid bools
    src = torch.randint(0, high, (shape[0], *shape[1:], torch.empty(0, dtype=dtype).element_size()),
                        dtype=torch.uint8, generator=generator).view(dtype).reshape(shape)
    dst = torch.zeros((count + 5, *shape[1:]), dtype=dtype)
    before = dst.clone()
    dst_at = torch.randperm(count + 5, generator=generator)[:count].numpy()
    src_at = torch.randint(0, shape[0], (count,), generator=generator).numpy()
    copy_rows(row_words(_bytes(dst)), dst_at, row_words(_bytes(src)), src_at)
    expected = before.clone()
    expected[torch.from_numpy(dst_at)] = src[torch.from_numpy(src_at)]
    assert torch.equal(dst.view(torch.uint8), expected.view(torch.uint8))


@pytest.mark.parametrize(
    ("shape", "dtype"),
    [((40, 100), torch.float32), ((40,), torch.int64), ((40, 3), torch.uint8), ((40, 7), torch.bfloat16)],
)
@pytest.mark.parametrize("count", [0, 1, 3 * PREFETCH_AHEAD + 1])
def test_merge_writes_each_row_from_the_cache_or_the_sent_rows(
    shape: tuple[int, ...], dtype: torch.dtype, count: int
) -> None:
    generator = torch.Generator().manual_seed(count)
    cached = torch.randint(0, 256, (shape[0], *shape[1:], dtype.itemsize), dtype=torch.uint8,
                           generator=generator).view(dtype).reshape(shape)
    from_cache = torch.rand(count, generator=generator) < 0.5
    sent = torch.randint(0, 256, (int((~from_cache).sum()), *shape[1:], dtype.itemsize), dtype=torch.uint8,
                         generator=generator).view(dtype).reshape(-1, *shape[1:])
    where = torch.randint(0, shape[0], (count,), generator=generator)  # hits may repeat
    where[~from_cache] = -1 - torch.arange(sent.shape[0])
    dst = torch.zeros((count, *shape[1:]), dtype=dtype)
    merge_rows(row_words(_bytes(dst)), where.numpy(), row_words(_bytes(cached)), row_words(_bytes(sent)))
    expected = torch.empty_like(dst)
    expected[from_cache] = cached[where[from_cache]]
    expected[~from_cache] = sent
    assert torch.equal(dst.view(torch.uint8), expected.view(torch.uint8))


def test_row_words_are_the_widest_word_dividing_a_row() -> None:
    assert row_words(np.zeros((4, 100), np.float32)).dtype == np.uint64
    assert row_words(np.zeros((4, 3), np.int16)).dtype == np.uint16
    assert row_words(np.zeros((4, 3), np.uint8)).shape == (4, 3)
    words = row_words(np.zeros(4, np.int32))
    assert words.shape == (4, 1) and words.dtype == np.uint32


def _bytes(rows: torch.Tensor) -> np.ndarray:
    return rows.reshape(rows.shape[0], math.prod(rows.shape[1:])).view(torch.uint8).numpy()
