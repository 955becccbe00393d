"""A memory cgroup for one command: a container's memory limit, without a container.

``MemoryCgroup(limit)`` makes a child of this process's own memory cgroup (v1 or v2) with a
limit; ``launcher`` is a command prefix that moves the command into it before it starts, so
everything it allocates (and the page cache it fills) is charged there from its first byte.
Making one needs root and a writable cgroup hierarchy; ``unavailable()`` says why not.
"""
from __future__ import annotations

import os
import uuid
from pathlib import Path

from gnnstore.backend.features.memory_limit import LIMIT_FILE, own_memory_cgroups

_EVENTS = {1: ("memory.oom_control", "oom_kill"), 2: ("memory.events", "oom_kill")}


def unavailable() -> str | None:
    """Why no memory cgroup can be made here (``None``: one can)."""
    if os.geteuid() != 0:
        return "making a memory cgroup needs root"
    try:
        MemoryCgroup(1 << 30).close()
    except OSError as exc:
        return f"no writable memory cgroup here ({exc.strerror})"
    return None


class MemoryCgroup:
    """A child memory cgroup limited to ``limit_bytes`` (removed by ``close()``).

    Raises:
        OSError: no memory hierarchy is mounted writable, or the limit is refused.
    """

    def __init__(self, limit_bytes: int) -> None:
        found = own_memory_cgroups()
        v1 = [c for c in found if c[0] == 1]
        version, _, mount_point, relative = (v1 or found or [(0, "", Path("/nonexistent"), "")])[0]
        self.version = version
        self.folder = mount_point / relative / f"gnnstore-{uuid.uuid4().hex[:12]}"
        self.folder.mkdir()
        try:
            (self.folder / LIMIT_FILE.get(version, "memory.max")).write_text(str(limit_bytes))
        except OSError:
            self.folder.rmdir()
            raise
        self.limit_bytes = limit_bytes

    @property
    def launcher(self) -> list[str]:
        """A command prefix: ``[*launcher, *command]`` runs ``command`` in this cgroup."""
        return ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', str(self.folder)]

    def oom_kills(self) -> int:
        """Processes the kernel killed in this cgroup for want of memory."""
        file, key = _EVENTS[self.version]
        for line in (self.folder / file).read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
        return 0

    def close(self) -> None:
        """Remove the cgroup (its processes must have ended)."""
        self.folder.rmdir()

    def __enter__(self) -> "MemoryCgroup":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
