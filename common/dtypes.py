"""The dtypes a feature attribute may have, by name, and the numpy arrays that hold them.

A dtype is named as torch and the wire name it (``"float32"``, ``"bfloat16"``); the server keeps
and moves rows as numpy arrays of ``storage_dtype(name)``: the dtype itself, or for
``bfloat16``, which numpy lacks, its raw 16-bit words. ``round_into`` narrows float rows to a
16-bit float the way torch's ``Tensor.to`` does, so rows sent narrowed match the trainer's own
conversion bit for bit.
"""
from __future__ import annotations

import numba
import numpy as np

from gnnstore.common.errors import InvalidRequestError

ITEMSIZE: dict[str, int] = {
    "bool": 1, "uint8": 1, "int8": 1, "int16": 2, "int32": 4, "int64": 8,
    "float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "complex64": 8, "complex128": 16,
}
"""Every dtype an attribute may have, by name, with its bytes an element."""


def dtype_name(dtype: object) -> str:
    """The name of a dtype given by name, as a numpy dtype or as a torch dtype.

    Raises:
        InvalidRequestError: a dtype no attribute may have.
    """
    name = dtype if isinstance(dtype, str) else str(dtype).removeprefix("torch.")
    if name not in ITEMSIZE:
        raise InvalidRequestError(f"unknown tensor dtype {name[:40]!r} (supported: {sorted(ITEMSIZE)})")
    return name


def storage_dtype(name: str) -> np.dtype:
    """The numpy dtype rows of dtype ``name`` are held as (raw words for ``bfloat16``)."""
    return np.dtype("<u2") if name == "bfloat16" else np.dtype(dtype_name(name))


def computable(rows: np.ndarray, name: str) -> np.ndarray:
    """Rows of dtype ``name`` as numpy computes with them: ``bfloat16`` words widened (exactly)
    to float32, any other dtype as it is."""
    if name != "bfloat16":
        return rows
    return (rows.astype(np.uint32) << 16).view(np.float32)


def round_into(rows: np.ndarray, out: np.ndarray, name: str) -> None:
    """Write float rows (float32 or float64) into ``out``, a contiguous array of ``name``'s
    storage (``float16``, or ``bfloat16`` as raw words) of their shape, each value rounded to
    nearest even as torch rounds it (float64 through float32 first), in one pass."""
    with np.errstate(over="ignore"):  # beyond a narrower float's range is infinity, as in torch
        wide = np.ascontiguousarray(rows, dtype=np.float32)
        if name == "float16":
            out[...] = wide
        else:
            _bfloat16_words(wide.reshape(-1).view(np.uint32), out.reshape(-1))


@numba.njit(cache=True, nogil=True)
def _bfloat16_words(bits: np.ndarray, words: np.ndarray) -> None:
    for i in range(bits.shape[0]):
        b = bits[i]
        if b & 0x7FFFFFFF > 0x7F800000:  # a NaN: torch's quiet NaN (rounding could carry it into infinity)
            words[i] = 0x7FC0
        else:
            words[i] = (b + 0x7FFF + ((b >> 16) & 1)) >> 16
