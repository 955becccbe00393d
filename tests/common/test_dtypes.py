"""The dtypes by name, their numpy storage, and narrowing rows bit for bit as torch does."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from gnnstore.common.dtypes import ITEMSIZE, dtype_name, round_into, storage_dtype
from gnnstore.common.errors import InvalidRequestError


def test_every_dtype_is_stored_in_a_numpy_dtype_of_its_width() -> None:
    for name, width in ITEMSIZE.items():
        assert storage_dtype(name).itemsize == width == getattr(torch, name).itemsize
    assert storage_dtype("bfloat16") == np.uint16 and storage_dtype("float16") == np.float16
    assert dtype_name(torch.bfloat16) == "bfloat16" and dtype_name(np.dtype(np.float32)) == "float32"
    with pytest.raises(InvalidRequestError, match="unknown tensor dtype 'float8'"):
        dtype_name("float8")


@pytest.mark.parametrize("wide", [torch.float32, torch.float64])
@pytest.mark.parametrize("narrow", [torch.bfloat16, torch.float16])
def test_rows_narrow_bit_for_bit_as_torch_narrows_them(wide: torch.dtype, narrow: torch.dtype) -> None:
    values = torch.randn(4000, generator=torch.Generator().manual_seed(0)) * torch.logspace(-45, 38, 4000)
    specials = torch.tensor([0.0, -0.0, float("inf"), -float("inf"), 3.4e38, -3.4e38, 1e-45, -1e-45, 65519.0, 65520.0])
    rows = torch.cat([values, -values, specials]).to(wide).reshape(-1, 10)
    out = np.empty(rows.shape, storage_dtype(str(narrow).removeprefix("torch.")))
    round_into(rows.numpy(), out, str(narrow).removeprefix("torch."))
    assert np.array_equal(out.view(np.uint16), rows.to(narrow).view(torch.int16).numpy().view(np.uint16))


def test_a_nan_stays_a_nan() -> None:
    rows = np.array([[np.nan, -np.nan, np.float32(1.5)]], np.float32)
    rows.view(np.uint32)[0, 1] = 0xFF800001  # a signalling NaN whose rounding would carry into infinity
    out = np.empty(rows.shape, np.uint16)
    round_into(rows, out, "bfloat16")
    assert torch.from_numpy(out.view(np.int16)).view(torch.bfloat16).isnan().tolist() == [[True, True, False]]
