"""The dtypes a feature attribute may have, by name, and the numpy arrays that hold them.

A dtype is named as torch and the wire name it (``"float32"``, ``"bfloat16"``); the server keeps
and moves rows as numpy arrays of ``storage_dtype(name)``: the dtype itself, or for
``bfloat16``, which numpy lacks, its raw 16-bit words. ``rounded`` narrows float rows to a
16-bit float the way torch's ``Tensor.to`` does, so rows sent narrowed match the trainer's own
conversion bit for bit.
"""
from __future__ import annotations

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


def rounded(rows: np.ndarray, name: str) -> np.ndarray:
    """Float rows (float32 or float64) as ``name`` (``float16``, or ``bfloat16`` as raw words),
    each value rounded to nearest even as torch rounds it (float64 through float32 first)."""
    with np.errstate(over="ignore"):  # beyond a narrower float's range is infinity, as in torch
        wide = np.ascontiguousarray(rows, dtype=np.float32)
        if name == "float16":
            return wide.astype(np.float16)
    bits = wide.view(np.uint32)
    words = ((bits + (0x7FFF + ((bits >> 16) & 1))) >> 16).astype(np.uint16)
    words[np.isnan(wide)] = 0x7FC0  # as torch's scalar conversion (rounding could carry a NaN into infinity)
    return words
