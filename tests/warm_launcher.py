"""Python children forked from a process that imported torch, PyG and gnnstore once.

A child ``python`` process spends ~7 CPU-seconds importing torch and PyG before it does its
work, and the suite starts a few hundred of them (servers, CLI commands, "a new process"
scripts): about a third of its CPU. ``popen`` and ``run`` stand in for ``subprocess.Popen`` and
``subprocess.run``: a *zygote* (one per test process, started on first use) imports the modules
once, then forks each child, which runs its ``-c`` code, its ``-m gnnstore`` command or its
script as a fresh interpreter would (arguments, ``-W`` options, environment, working directory,
``sys.path[0]``, ``__main__``, stdio, warning filters): a real, separate process, without the
import cost. One difference: warnings a library raises as it is imported were raised in the zygote,
so a child does not print them. ``tests/test_warm_launcher.py`` holds each child to a cold one.
``ServerProcess.spawn`` is ``popen`` in the suite (``conftest.py``).

The zygote double-forks, so the child is re-parented to the test process (a child subreaper,
Linux ``prctl``), which waits for it as for any child. Any other command (other interpreter
options such as ``-X importtime``, other modules, other programs, another OS) goes to
``subprocess``, so a test that must see a cold interpreter keeps one.
"""
from __future__ import annotations

import atexit
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
import types
from collections.abc import Sequence
from typing import IO, Any

PR_SET_CHILD_SUBREAPER = 36
_WARM_MODULES = ("gnnstore",)
_FILTERS: dict[str, list] = {}  # the zygote's warning filters: before its imports, and what they added


class ForkedProcess:
    """The ``subprocess.Popen`` interface the tests use, for a forked child."""

    def __init__(self, pid: int, args: Sequence[str], stdout: IO | None, stderr: IO | None) -> None:
        self.pid, self.args, self.stdout, self.stderr, self.returncode = pid, list(args), stdout, stderr, None
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
                raise subprocess.TimeoutExpired(self.args, timeout)
            time.sleep(0.02)
        return self.returncode

    def communicate(self, timeout: float | None = None) -> tuple[Any, Any]:
        """Read stdout and stderr to their ends (both at once, so neither pipe fills), then wait."""
        deadline = None if timeout is None else time.monotonic() + timeout
        read: dict[str, Any] = {}
        readers = [threading.Thread(target=lambda n=name, s=stream: read.update({n: s.read()}), daemon=True)
                   for name, stream in (("stdout", self.stdout), ("stderr", self.stderr)) if stream is not None]
        for reader in readers:
            reader.start()
        for reader in readers:
            reader.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
            if reader.is_alive():
                raise subprocess.TimeoutExpired(self.args, timeout)
        for stream in (self.stdout, self.stderr):
            if stream is not None:
                stream.close()
        self.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return read.get("stdout"), read.get("stderr")

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

    def fork(self, request: dict, fds: Sequence[int]) -> int:
        """Fork a child for ``request`` with ``fds`` as its stdin, stdout and stderr; its pid."""
        with self._lock:
            socket.send_fds(self._sock, [json.dumps(request).encode()], list(fds))
            reply = self._sock.recv(64)
        if not reply:
            raise RuntimeError("the warm launcher exited")
        return int(reply)


_zygote: _Zygote | None = None
_zygote_lock = threading.Lock()


def _warm_request(command: Sequence[str]) -> dict | None:
    """What the zygote runs for ``command``, or None when only a cold interpreter runs it right."""
    if not sys.platform.startswith("linux") or not command or command[0] != sys.executable:
        return None
    rest, warn = list(command[1:]), []
    while rest[:1] == ["-W"] and len(rest) > 1:
        warn, rest = [*warn, rest[1]], rest[2:]
    if rest[:1] == ["-c"] and len(rest) > 1:
        return {"warn": warn, "code": rest[1], "argv": ["-c", *rest[2:]]}
    if rest[:1] == ["-m"] and len(rest) > 1 and rest[1] in _WARM_MODULES:
        return {"warn": warn, "module": rest[1], "argv": [rest[1], *rest[2:]]}
    if rest and not rest[0].startswith("-") and rest[0].endswith(".py"):
        return {"warn": warn, "script": rest[0], "argv": rest}
    return None


def _child_end(spec: Any, read_ends: list[int], own_fd: int) -> int:
    """The descriptor the child gets for one of its stdio streams, as ``Popen`` reads ``spec``."""
    if spec is None:
        return os.dup(own_fd)
    if spec == subprocess.PIPE:
        read_end, write_end = os.pipe()
        read_ends.append(read_end)
        return write_end
    if spec == subprocess.DEVNULL:
        return os.open(os.devnull, os.O_RDWR)
    return os.dup(spec if isinstance(spec, int) else spec.fileno())


def popen(command: Sequence[str], *, stdout: Any = None, stderr: Any = None, text: bool = False,
          env: dict[str, str] | None = None, cwd: str | os.PathLike | None = None):
    """``subprocess.Popen(command, ...)``, forked from the zygote when it can be (stdin: /dev/null)."""
    global _zygote
    request = _warm_request(command)
    if request is None:
        return subprocess.Popen(command, stdout=stdout, stderr=stderr, text=text, env=env, cwd=cwd)
    with _zygote_lock:
        if _zygote is None:
            _zygote = _Zygote()
    request.update(env=dict(os.environ if env is None else env), cwd=os.path.abspath(cwd or os.getcwd()))
    out_read: list[int] = []
    err_read: list[int] = []
    fds = [os.open(os.devnull, os.O_RDONLY), _child_end(stdout, out_read, 1)]
    fds.append(os.dup(fds[1]) if stderr == subprocess.STDOUT else _child_end(stderr, err_read, 2))
    try:
        pid = _zygote.fork(request, fds)
    except BaseException:
        for read_end in out_read + err_read:
            os.close(read_end)
        raise
    finally:
        for fd in fds:
            os.close(fd)
    mode = "r" if text else "rb"
    streams = [os.fdopen(ends[0], mode) if ends else None for ends in (out_read, err_read)]
    return ForkedProcess(pid, command, *streams)


def run(command: Sequence[str], *, capture_output: bool = False, check: bool = False,
        timeout: float | None = None, **kwargs: Any) -> subprocess.CompletedProcess:
    """``subprocess.run(command, ...)``, forked from the zygote when it can be."""
    if _warm_request(command) is None:
        return subprocess.run(command, capture_output=capture_output, check=check, timeout=timeout, **kwargs)
    if capture_output:
        kwargs.update(stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc = popen(command, **kwargs)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise
    if check and proc.returncode:
        raise subprocess.CalledProcessError(proc.returncode, command, out, err)
    return subprocess.CompletedProcess(command, proc.returncode, out, err)


def _run_child(request: dict, stdin_fd: int, stdout_fd: int, stderr_fd: int) -> None:
    """In the forked child: take the request's stdio, environment and directory, run its code."""
    for fd, target in ((stdin_fd, 0), (stdout_fd, 1), (stderr_fd, 2)):
        os.dup2(fd, target)
        os.close(fd)  # only 0, 1 and 2 stay open, as in a process Popen starts
    # New stream objects, as a starting interpreter makes: the zygote's knew other files
    sys.stdin = sys.__stdin__ = open(0, closefd=False)
    sys.stdout = sys.__stdout__ = open(1, "w", closefd=False)
    sys.stderr = sys.__stderr__ = open(2, "w", buffering=1, closefd=False, errors="backslashreplace")
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    import warnings

    warnings.filters[:] = _FILTERS["base"]  # as a cold interpreter: its -W options first, then imports'
    sys.warnoptions[:] = request["warn"]
    for option in request["warn"]:
        warnings._setoption(option)
    warnings.filters[:0] = _FILTERS["front"]
    warnings.filters.extend(_FILTERS["back"])
    warnings._filters_mutated()
    sys.argv = request["argv"]
    code = 0
    try:
        if "module" in request:
            sys.path[0] = os.getcwd()
            runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
        elif "script" in request:
            sys.path[0] = os.path.dirname(os.path.abspath(request["script"]))
            runpy.run_path(request["script"], run_name="__main__")
        else:
            sys.path[0] = ""
            main = sys.modules["__main__"] = types.ModuleType("__main__")
            exec(compile(request["code"], "<string>", "exec"), main.__dict__)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if not isinstance(exc.code, int | None):
            print(exc.code, file=sys.stderr)
    except BaseException as exc:
        import traceback

        traceback.print_exception(type(exc), exc, exc.__traceback__.tb_next)  # from the child's own frame
        code = 1
    threading._shutdown()  # as the interpreter ends: wait for non-daemon threads, then atexit
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _zygote_main(fd: int) -> None:
    # The test process gone, its socket reads empty and we return. (Not PR_SET_PDEATHSIG: that
    # fires when the *thread* that started us ends, and a test may start us from a pool thread.)
    import warnings

    # The imports' warnings are not shown (our stderr is /dev/null anyway); the filters they add
    # are kept, for each child to place around its own -W options as a cold interpreter would
    base = list(warnings.filters)
    shown, warnings.showwarning = warnings.showwarning, lambda *args, **kwargs: None
    import torch  # noqa: F401

    import gnnstore.backend.server.server  # noqa: F401
    import gnnstore.cli  # noqa: F401
    import gnnstore.client  # noqa: F401
    warnings.showwarning = shown
    after = list(warnings.filters)
    start = next(i for i in range(len(after) - len(base) + 1) if after[i:i + len(base)] == base)
    _FILTERS.update(base=base, front=after[:start], back=after[start + len(base):])
    sock = socket.socket(fileno=fd)
    while True:
        message, fds, _, _ = socket.recv_fds(sock, 1 << 20, 3)
        if not message:
            return
        request = json.loads(message)
        child_pid_r, child_pid_w = os.pipe()
        middle = os.fork()
        if middle == 0:  # double fork: the child's parent exits, so it goes to the subreaper
            sock.close()
            os.close(child_pid_r)
            child = os.fork()
            if child == 0:
                os.close(child_pid_w)
                _run_child(request, *fds)
            os.write(child_pid_w, str(child).encode())
            os._exit(0)
        os.close(child_pid_w)
        for received in fds:
            os.close(received)
        with os.fdopen(child_pid_r, "rb") as pid_pipe:
            child_pid = pid_pipe.read()
        os.waitpid(middle, 0)
        sock.sendall(child_pid)


if __name__ == "__main__":
    _zygote_main(int(sys.argv[1]))
