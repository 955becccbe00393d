"""A small file written so that a process killed at any instruction leaves the old bytes or the
new ones, and the new ones survive once the call returns: a fsynced part file renamed into
place, then the folder fsynced."""
from __future__ import annotations

import os
from pathlib import Path

PART_PREFIX = "."
PART_SUFFIX = ".part"


def write_durably(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data``, atomically and durably (the part file is ``.<name>.part``)."""
    part = path.with_name(f"{PART_PREFIX}{path.name}{PART_SUFFIX}")
    with open(part, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    os.replace(part, path)
    sync_directory(path.parent)


def sync_directory(path: Path) -> None:
    """Make the entries of folder ``path`` (a rename, a removal) durable."""
    descriptor = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
