"""The random seed of one sampling call: the same for the in-process and the remote sampler."""
from __future__ import annotations

from torch.utils.data import get_worker_info

_GOLDEN = 0x9E3779B97F4A7C15


def seeded_call_seed(seed: int, call: int) -> int:
    """The random seed of call ``call`` of a sampler built with ``seed`` in this loader worker.

    The in-process and the remote sampler derive it alike, so ``seed=`` means the same run in
    both: distinct per (seed, DataLoader worker, call), a 64-bit unsigned int.
    """
    info = get_worker_info()
    worker = 0 if info is None else info.id + 1
    return (seed * _GOLDEN + worker * (_GOLDEN >> 7) + call) % (1 << 64)
