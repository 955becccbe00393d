"""The 16-bit float dtypes rows of wider float attrs may travel as (lossy, opt-in), by name."""
from __future__ import annotations

from gnnstore.common.errors import InvalidRequestError

WIRE_DTYPES = ("bfloat16", "float16")
"""The dtypes rows of float attrs may travel as (lossy: each value rounded)."""
NARROWED_DTYPES = ("float32", "float64")
"""Attr dtypes whose rows travel as a requested wire dtype; others travel as stored."""


def wire_dtype_name(dtype: object) -> str:
    """The name of a dtype rows may travel as (``"bfloat16"`` or ``"float16"``), given by name
    or as a torch dtype.

    Raises:
        InvalidRequestError: any other dtype.
    """
    name = dtype if isinstance(dtype, str) else str(dtype).removeprefix("torch.")
    if name not in WIRE_DTYPES:
        raise InvalidRequestError(
            f"feature rows can travel as {sorted(WIRE_DTYPES)} (lossy) or as stored, not as {name[:40]!r}"
        )
    return name


def narrowed(dtype: str | None, wire_dtype: str | None) -> str | None:
    """The dtype rows of a ``dtype`` attr travel as: ``wire_dtype`` for float32 and float64
    attrs when one is asked for, else their own (all by name)."""
    return wire_dtype if wire_dtype is not None and dtype in NARROWED_DTYPES else dtype
