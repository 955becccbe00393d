"""Tensors to and from the numpy arrays the server keeps rows in (``common/dtypes.py``): for the
trainer's side and the PyG stores; the server itself never imports this."""
from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from gnnstore.common.dtypes import dtype_name, storage_dtype
from gnnstore.common.errors import InvalidRequestError


def tensor_rows(value: object, what: str) -> tuple[np.ndarray, str]:
    """A tensor (any device), array or (nested) list as the host array that holds its rows and
    its dtype's name; ``bfloat16`` rows as raw words. A CPU tensor's array shares its memory.

    Raises:
        InvalidRequestError: something that is no tensor, or of a dtype no attribute may have;
            ``what`` names it.
    """
    if isinstance(value, np.ndarray) and value.dtype != object:
        value = torch.from_numpy(value)
    if not isinstance(value, Tensor):
        try:
            value = torch.as_tensor(value)
        except (TypeError, ValueError, RuntimeError) as exc:
            raise InvalidRequestError(
                f"{what}: expected a Tensor of shape [N, *] with fixed-width rows, got "
                f"{type(value).__name__} ({exc})"
            ) from exc
    try:
        name = dtype_name(value.dtype)
    except InvalidRequestError:
        raise InvalidRequestError(f"{what}: unsupported dtype {value.dtype}") from None
    value = value.detach().cpu()
    if name == "bfloat16":
        value = value.contiguous().view(torch.int16)
    return value.numpy().view(storage_dtype(name)), name


def rows_tensor(rows: np.ndarray, name: str) -> Tensor:
    """The tensor of dtype ``name`` over ``rows`` (as ``tensor_rows`` made them; no copy)."""
    if not rows.size:  # numpy's strides of an empty array are not a tensor's (views would fail)
        return torch.empty(rows.shape, dtype=getattr(torch, name))
    tensor = torch.from_numpy(rows)
    return tensor.view(torch.bfloat16) if name == "bfloat16" else tensor
