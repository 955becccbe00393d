"""benchmarks.link: the block runs in a namespace of its own behind a capped loopback, then leaves it."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess

import pytest

from benchmarks.link import capped_loopback

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not (shutil.which("ip") and shutil.which("tc")), reason="needs root, ip and tc"
)


def _namespace() -> int:
    return os.stat("/proc/thread-self/ns/net").st_ino


def test_the_block_runs_behind_a_capped_loopback_and_returns_home() -> None:
    home = _namespace()
    with capped_loopback("10gbit") as refused:
        assert refused is None
        assert _namespace() != home
        name = subprocess.run(["ip", "netns", "identify"], capture_output=True, text=True, check=True).stdout.strip()
        assert name.startswith("gnnstore-link-")
        qdisc = subprocess.run(["tc", "qdisc", "show", "dev", "lo"], capture_output=True, text=True, check=True)
        assert "tbf" in qdisc.stdout and "10Gbit" in qdisc.stdout
        links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True).stdout
        assert [line.split(":")[1].strip() for line in links.splitlines()] == ["lo"]
        with socket.create_server(("127.0.0.1", 0)) as server:  # the loopback there is up
            with socket.create_connection(server.getsockname()):
                pass
    assert _namespace() == home
    left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
    assert name not in left  # (not any gnnstore-link-: a benchmark may hold one meanwhile)
