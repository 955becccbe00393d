"""Arrays handed in as numpy arrays or tensors, read as numpy without importing torch."""
from __future__ import annotations

import numpy as np


def host_array(value: object) -> np.ndarray | None:
    """``value`` as a numpy array in host memory, or ``None`` when it is not an array.

    A CPU tensor is viewed without a copy; a GPU tensor is copied to the host; a bfloat16 one
    (numpy has no such dtype) is widened to float32. Lists and scalars are not arrays here.
    """
    if not hasattr(value, "__array__") or isinstance(value, (list, tuple)):
        return None
    if getattr(value, "is_cuda", False):
        value = value.cpu()
    if str(getattr(value, "dtype", "")) == "torch.bfloat16":
        value = value.float()
    return np.asarray(value)
