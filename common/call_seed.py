"""The random seed of one sampling call: the same for the in-process and the remote sampler."""
from __future__ import annotations

import sys

_GOLDEN = 0x9E3779B97F4A7C15


def seeded_call_seed(seed: int, call: int) -> int:
    """The random seed of call ``call`` of a sampler built with ``seed`` in this loader worker.

    The in-process and the remote sampler derive it alike, so ``seed=`` means the same run in
    both: distinct per (seed, DataLoader worker, call), a 64-bit unsigned int.
    """
    return (seed * _GOLDEN + _worker() * (_GOLDEN >> 7) + call) % (1 << 64)


def _worker() -> int:
    """The DataLoader worker this runs in (its id + 1), else 0. Read through ``sys.modules``: a
    process that has not loaded torch's data loading (a server) runs in no such worker."""
    data = sys.modules.get("torch.utils.data")
    info = None if data is None else data.get_worker_info()
    return 0 if info is None else info.id + 1
