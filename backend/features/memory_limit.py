"""The memory this process may use: the machine's, or the lowest cgroup limit above it.

A container's limit is a cgroup's: ``memory.limit_in_bytes`` under cgroup v1,
``memory.max`` under v2. Which cgroup is this process's own comes from ``/proc/self/cgroup``
(a v1 line per hierarchy, ``N:memory:/path``; the v2 line ``0::/path``), and where that
hierarchy is mounted from ``/proc/self/mountinfo`` (its mount point, and which cgroup the
mount's root is: a container sees its own cgroup at the mount point). A cgroup nested in a
limited one is bound by every ancestor's limit too, so the folders are read from the process's
own up to the mount point and the lowest limit wins.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

LIMIT_FILE = {1: "memory.limit_in_bytes", 2: "memory.max"}
"""The file of a cgroup's memory limit, by cgroup version."""


@dataclass(frozen=True)
class MemoryLimit:
    """``bytes`` this process may use, and where that figure comes from (``source``)."""

    bytes: int
    source: str

    def __str__(self) -> str:
        return f"{self.bytes / 2**30:.2f} GiB ({self.source})"


def memory_limit(root: Path = Path("/")) -> MemoryLimit:
    """The machine's physical memory, or the lowest limit of this process's cgroups when lower.

    ``root`` is where ``/proc`` and the cgroup mounts are found (``/`` but in tests).
    """
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    best = MemoryLimit(physical, "the machine's memory")
    for version, own, mount_point, relative in own_memory_cgroups(root):
        for folder in _folders_up(mount_point, relative):
            limit = _read_limit(folder / LIMIT_FILE[version])
            if limit is not None and limit < best.bytes:
                best = MemoryLimit(limit, f"cgroup v{version} {own}")
    return best


def own_memory_cgroups(root: Path = Path("/")) -> list[tuple[int, str, Path, str]]:
    """(cgroup version, the cgroup's path, the hierarchy's mount point, the cgroup's folder
    below it) of each memory cgroup this process is in."""
    return [
        (version, own, root / mount_point.lstrip("/"), _relative(own, mount_root))
        for version, own in _own_cgroups(root)
        for mount_point, mount_root in _mounts(root, version)
    ]


def _own_cgroups(root: Path) -> list[tuple[int, str]]:
    """(cgroup version, path) of this process's memory cgroups."""
    try:
        lines = (root / "proc/self/cgroup").read_text().splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hierarchy, controllers, path = parts
        if hierarchy == "0" and controllers == "":
            found.append((2, path))
        elif "memory" in controllers.split(","):
            found.append((1, path))
    return found


def _mounts(root: Path, version: int) -> list[tuple[str, str]]:
    """(mount point, cgroup at the mount's root) of each mount of the hierarchy: v1's memory
    controller, or cgroup2."""
    try:
        lines = (root / "proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        head, sep, tail = line.partition(" - ")
        fields, after = head.split(), tail.split()
        if not sep or len(fields) < 5 or len(after) < 3:
            continue
        fstype, options = after[0], after[2].split(",")
        if (version == 2 and fstype == "cgroup2") or (version == 1 and fstype == "cgroup" and "memory" in options):
            found.append((fields[4], fields[3]))
    return found


def _relative(own: str, mount_root: str) -> str:
    """The process's cgroup below the mount's root ("" when the mount's root is the cgroup, or
    the mount shows another namespace's view)."""
    if own == mount_root or not own.startswith(mount_root.rstrip("/") + "/"):
        return ""
    return own[len(mount_root.rstrip("/")) + 1 :]


def _folders_up(mount_point: Path, relative: str) -> list[Path]:
    """The cgroup's folder and each ancestor's, up to the mount point."""
    parts = [p for p in relative.split("/") if p]
    return [mount_point.joinpath(*parts[:k]) for k in range(len(parts), -1, -1)]


def _read_limit(file: Path) -> int | None:
    """A limit file's bytes; ``None`` for ``max`` (v2's no limit) or a file that is not there."""
    try:
        text = file.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None
