"""prefetch: a hint that compiles for any dtype and rank and never changes what a kernel reads."""
from __future__ import annotations

import numba
import numpy as np
import pytest
from numba.core.errors import TypingError

from gnnstore.common.cpu_prefetch import prefetch


@numba.njit
def _sum_1d(values: np.ndarray, at: np.ndarray) -> float:
    total = 0.0
    for j in range(at.shape[0]):
        if j + 1 < at.shape[0]:
            prefetch(values, at[j + 1])
        total += values[at[j]]
    return total


@numba.njit
def _sum_2d(values: np.ndarray, at: np.ndarray) -> float:
    total = 0.0
    for j in range(at.shape[0]):
        prefetch(values, (at[j], np.int32(0)))
        total += values[at[j], 0]
    return total


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8, np.float32, np.float64])
def test_a_kernel_reads_the_same_values_with_prefetch_on_any_dtype(dtype: type) -> None:
    values = np.arange(1000).astype(dtype)
    at = np.random.default_rng(0).integers(0, 1000, 300)
    assert _sum_1d(values, at) == float(values[at].astype(np.float64).sum())
    grid = np.arange(2000).astype(dtype).reshape(1000, 2)
    assert _sum_2d(grid, at.astype(np.int32)) == float(grid[at, 0].astype(np.float64).sum())


def test_an_index_of_the_wrong_rank_does_not_compile() -> None:
    @numba.njit
    def wrong(values: np.ndarray) -> None:
        prefetch(values, (0, 0))

    with pytest.raises(TypingError):
        wrong(np.zeros(4))
