"""Whether a process still runs, for sweeping what a killed process left behind."""
from __future__ import annotations

import os


def process_exists(pid: int) -> bool:
    """Whether process ``pid`` exists on this host (a zombie, or a reused pid, counts as existing)."""
    return os.path.exists(f"/proc/{pid}")
