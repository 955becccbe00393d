"""A link between hosts, stood in for on one machine: a network namespace whose loopback is
capped with ``tc ... tbf``.

``capped_loopback("10gbit")`` creates the namespace, brings its loopback up with a token-bucket
cap, and moves the calling thread into it for the ``with`` block: a server and trainer processes
started there talk over a socket no faster than the cap (no shared memory: the rows that use it
turn it off). It needs root and ``ip``/``tc``; without them it yields the reason it could not,
and the benchmark skips the row saying so.
"""
from __future__ import annotations

import ctypes
import os
import secrets
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

_CLONE_NEWNET = 0x40000000


@contextmanager
def capped_loopback(rate: str) -> Iterator[str | None]:
    """Run the block in a fresh network namespace whose loopback carries at most ``rate``
    (``tc`` units, e.g. ``"10gbit"``); yields None there, or the reason it could not."""
    missing = [tool for tool in ("ip", "tc") if shutil.which(tool) is None]
    if missing or os.geteuid() != 0:
        yield f"needs root and {', '.join(missing) or 'ip, tc'}"
        return
    name = f"gnnstore-link-{secrets.token_hex(4)}"
    try:
        _run("ip", "netns", "add", name)
        _run("ip", "netns", "exec", name, "ip", "link", "set", "lo", "up")
        _run("ip", "netns", "exec", name, "tc", "qdisc", "add", "dev", "lo", "root", "tbf",
             "rate", rate, "burst", "4mb", "latency", "50ms")
    except subprocess.CalledProcessError as exc:
        subprocess.run(["ip", "netns", "del", name], capture_output=True)
        yield f"`{' '.join(exc.cmd[:6])}` failed: {exc.stderr.strip()}"
        return
    try:
        with open("/proc/thread-self/ns/net") as home, open(f"/run/netns/{name}") as capped:
            _setns(capped.fileno())
            try:
                yield None
            finally:
                _setns(home.fileno())
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True)


def _run(*command: str) -> None:
    subprocess.run(command, check=True, capture_output=True, text=True)


def _setns(fd: int) -> None:
    """Move the calling thread (and the processes it starts later) into the namespace ``fd``."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, _CLONE_NEWNET) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"setns: {os.strerror(errno)}")
