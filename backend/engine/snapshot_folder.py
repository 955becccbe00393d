"""Where a topology snapshot's folder lives, and its atomic publication (build aside, rename in)."""
from __future__ import annotations

import glob
import logging
import os
import re
import shutil
import uuid
from pathlib import Path

from gnnstore.common.processes import process_exists

logger = logging.getLogger(__name__)

_SAFE_NAME = re.compile(r"^[A-Za-z0-9._-]{1,100}$")


def snapshot_path(directory: str | os.PathLike, version: str) -> Path:
    """The folder a snapshot of ``version`` lives in under ``directory``."""
    name = version if _SAFE_NAME.match(version) else f"v-{uuid.uuid5(uuid.NAMESPACE_OID, version)}"
    return Path(directory) / name


class staging_dir:  # noqa: N801 (used as a context manager, like tempfile.TemporaryDirectory)
    """A temporary folder in ``directory`` renamed to the snapshot folder on a clean exit.

    If another process published the same version first, its folder wins and the temporary
    one is removed; on an error the temporary folder is removed and nothing is published.
    The folder's name carries the builder's pid: folders of builders that died (kill -9, a
    full disk's SIGBUS) are swept when the next build starts.
    """

    def __init__(self, directory: str | os.PathLike, version: str, *, replace: bool = False) -> None:
        self.target = snapshot_path(directory, version)
        self.replace = replace
        self.tmp = self.target.with_name(f".building-{os.getpid()}-{self.target.name}-{uuid.uuid4().hex[:8]}")

    def __enter__(self) -> Path:
        sweep_dead_builds(self.target.parent)
        self.tmp.mkdir(parents=True)
        return self.tmp

    def __exit__(self, exc_type: type | None, *exc: object) -> None:
        if exc_type is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            return
        old = None
        if self.replace and self.target.exists():
            old = self.target.with_name(f".old-{self.target.name}-{uuid.uuid4().hex[:8]}")
            os.rename(self.target, old)
        try:
            os.rename(self.tmp, self.target)
            logger.info("published topology snapshot %s", self.target)
        except OSError:  # a concurrent builder published the same version first
            shutil.rmtree(self.tmp, ignore_errors=True)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)  # open memory maps stay valid on POSIX


def sweep_dead_builds(directory: Path, name: str = "") -> None:
    """Remove ``.building-<pid>-<name>-*`` folders whose builder process no longer exists
    (any ``name`` when it is empty)."""
    if not directory.is_dir():
        return
    for path in directory.glob(f".building-*-{glob.escape(name)}-*" if name else ".building-*"):
        pid = path.name.split("-")[1]
        if not pid.isdigit() or not process_exists(int(pid)):
            shutil.rmtree(path, ignore_errors=True)
            logger.info("swept %s, left by a build that did not finish", path.name)
