"""``gnnstore serve`` as a child process, for the demo and tests: start, read the address, stop."""
from __future__ import annotations

import logging
import os
import selectors
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

from gnnstore.common.errors import PreconditionError

logger = logging.getLogger(__name__)

ADDRESS_MARK = "gnnstore serving on "
"""How the server's one start-up line begins; the bound ``host:port`` follows."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now (for a server restarted on it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ServerProcess:
    """A ``python -m gnnstore serve`` child on ``127.0.0.1`` with a free port.

    Args:
        data_dir: the data directory to serve.
        args: extra ``serve`` flags (e.g. ``"--read-only"``).
        log: file for the server's stderr (its log lines).
        env: extra environment variables.
        startup_timeout: seconds to wait for the start-up line.
        launcher: a command prefix the server runs under (e.g. one that limits its memory).

    Raises:
        PreconditionError: the server exited or stayed silent; the message holds its log.
    """

    spawn: Callable[..., subprocess.Popen] = subprocess.Popen
    """Starts the child: ``subprocess.Popen`` or a stand-in with its interface (the test suite
    forks its servers from a process that imported the server once: ``tests/warm_launcher.py``)."""

    def __init__(
        self,
        data_dir: Path,
        *args: str,
        log: Path,
        env: dict[str, str] | None = None,
        startup_timeout: float = 120.0,
        launcher: Sequence[str] = (),
    ) -> None:
        self.data_dir = Path(data_dir)
        self.log = Path(log)
        command = [
            *launcher, sys.executable, "-m", "gnnstore", "serve",
            "--data-dir", str(self.data_dir), "--host", "127.0.0.1", "--port", "0", *args,
        ]
        self._stderr: IO[str] = open(self.log, "w")
        self.proc = type(self).spawn(
            command, stdout=subprocess.PIPE, stderr=self._stderr, text=True,
            env={**os.environ, **(env or {})},
        )
        self.startup_line = self._read_startup_line(startup_timeout)
        self.address = self.startup_line[len(ADDRESS_MARK):].split(" ", 1)[0]
        logger.info("server process %d serving %s on %s", self.proc.pid, self.data_dir, self.address)

    def _read_startup_line(self, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as selector:
            selector.register(self.proc.stdout, selectors.EVENT_READ)
            while time.monotonic() < deadline:
                if selector.select(timeout=0.5):
                    line = self.proc.stdout.readline()
                    if line.startswith(ADDRESS_MARK):
                        return line.strip()
                    if not line:
                        break
                elif self.proc.poll() is not None:
                    break
        code = self.stop()
        raise PreconditionError(
            f"`gnnstore serve --data-dir {self.data_dir}` did not start (exit code {code}); "
            f"its log ({self.log}):\n{self.log.read_text()}"
        )

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM, wait for the graceful exit and return the exit code (SIGKILL after ``timeout``)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.send_signal(signal.SIGUSR1)  # its threads' stacks, into its log
                time.sleep(1.0)
                self.proc.kill()
                self.proc.wait()
                logger.warning(
                    "server process %d ignored SIGTERM for %.0f s; killed it. The end of its log:\n%s",
                    self.proc.pid, timeout, self.log.read_text(errors="replace")[-20_000:],
                )
        self.proc.stdout.close()
        self._stderr.close()
        return self.proc.returncode

    def __enter__(self) -> "ServerProcess":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
