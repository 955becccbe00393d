"""``gnnstore serve`` children forked from a process that imported the server once.

A server process spends ~7 CPU-seconds importing torch and PyG before it reads its data
directory, and the suite starts over a hundred of them: about a third of its CPU. ``spawn``
stands in for ``subprocess.Popen`` in ``ServerProcess``: a *zygote* (one per test process,
started on first use) imports the server's modules once, then forks each server, which runs
``gnnstore``'s own ``main()`` with the same arguments and environment as ``python -m gnnstore``
would: a real, separate server process, without the import cost.

The zygote double-forks, so the server is re-parented to the test process (a child subreaper,
Linux ``prctl``), which waits for it as for any child. Commands that are not ``python -m
gnnstore ...`` (e.g. under a memory-limiting launcher) go to ``subprocess.Popen``.
"""
from __future__ import annotations

import ctypes
import json
import os
import runpy
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from typing import IO

PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER = 1, 36
_PREFIX = [sys.executable, "-m", "gnnstore"]


class ForkedServer:
    """The ``subprocess.Popen`` interface ``ServerProcess`` and the tests use, for a forked server."""

    def __init__(self, pid: int, stdout: IO[str]) -> None:
        self.pid, self.stdout, self.returncode = pid, stdout, None
        self._lock = threading.Lock()

    def poll(self) -> int | None:
        with self._lock:
            if self.returncode is None:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
                if pid:
                    self.returncode = os.waitstatus_to_exitcode(status)
            return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(["gnnstore", "serve"], timeout)
            time.sleep(0.02)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class _Zygote:
    """The warm process and the socket to it; one request at a time."""

    def __init__(self) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed")
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._proc = subprocess.Popen(
            [sys.executable, __file__, str(theirs.fileno())], pass_fds=[theirs.fileno()],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        theirs.close()
        self._sock, self._lock = ours, threading.Lock()

    def fork(self, argv: Sequence[str], env: dict[str, str], stderr: IO[str]) -> ForkedServer:
        read_end, write_end = os.pipe()
        try:
            with self._lock:
                request = json.dumps({"argv": list(argv), "env": env, "cwd": os.getcwd()}).encode()
                socket.send_fds(self._sock, [request], [write_end, stderr.fileno()])
                reply = self._sock.recv(64)
            if not reply:
                raise RuntimeError("the warm launcher exited")
            return ForkedServer(int(reply), os.fdopen(read_end, "r"))
        except BaseException:
            os.close(read_end)
            raise
        finally:
            os.close(write_end)


_zygote: _Zygote | None = None
_zygote_lock = threading.Lock()


def spawn(command: Sequence[str], *, stdout: int, stderr: IO[str], text: bool, env: dict[str, str]):
    """``subprocess.Popen(command, ...)`` for what ``ServerProcess`` starts, forked when it can be."""
    global _zygote
    if list(command[:3]) != _PREFIX or not sys.platform.startswith("linux"):
        return subprocess.Popen(command, stdout=stdout, stderr=stderr, text=text, env=env)
    with _zygote_lock:
        if _zygote is None:
            _zygote = _Zygote()
    return _zygote.fork(list(command[2:]), env, stderr)


def _serve(request: dict, stdout_fd: int, stderr_fd: int) -> None:
    """In the forked server: take the request's stdio, environment and directory, run the CLI."""
    devnull = os.open(os.devnull, os.O_RDONLY)
    for fd, target in ((devnull, 0), (stdout_fd, 1), (stderr_fd, 2)):
        os.dup2(fd, target)
        os.close(fd)  # only 0, 1 and 2 stay open, as in a process Popen starts
    # New stream objects, as a starting interpreter makes: the zygote's knew other files
    sys.stdin = sys.__stdin__ = open(0, closefd=False)
    sys.stdout = sys.__stdout__ = open(1, "w", closefd=False)
    sys.stderr = sys.__stderr__ = open(2, "w", buffering=1, closefd=False, errors="backslashreplace")
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    sys.argv = request["argv"]
    code = 0
    try:
        runpy.run_module("gnnstore", run_name="__main__", alter_sys=True)  # as `python -m gnnstore`
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)


def _zygote_main(fd: int) -> None:
    libc = ctypes.CDLL(None)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # the test process gone: so are we
    import warnings

    with warnings.catch_warnings():  # torch's import-time FutureWarnings: the servers print their own
        warnings.simplefilter("ignore")
        import torch  # noqa: F401

        import gnnstore.backend.server.server  # noqa: F401
        import gnnstore.cli  # noqa: F401
    sock = socket.socket(fileno=fd)
    while True:
        message, fds, _, _ = socket.recv_fds(sock, 1 << 20, 2)
        if not message:
            return
        request = json.loads(message)
        child_pid_r, child_pid_w = os.pipe()
        middle = os.fork()
        if middle == 0:  # double fork: the server's parent exits, so it goes to the subreaper
            sock.close()
            os.close(child_pid_r)
            server = os.fork()
            if server == 0:
                os.close(child_pid_w)
                _serve(request, *fds)
            os.write(child_pid_w, str(server).encode())
            os._exit(0)
        os.close(child_pid_w)
        for received in fds:
            os.close(received)
        with os.fdopen(child_pid_r, "rb") as pid_pipe:
            server_pid = pid_pipe.read()
        os.waitpid(middle, 0)
        sock.sendall(server_pid)


if __name__ == "__main__":
    _zygote_main(int(sys.argv[1]))
