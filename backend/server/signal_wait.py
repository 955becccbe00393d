"""Signals the server's main thread waits for, received without locks.

A Python signal handler runs between two bytecodes of the main thread, wherever that thread
is, and one that takes a lock (setting a ``threading.Event``) can wait on a lock the main
thread itself holds (a suspect, never reproduced, for a ``gnnstore serve`` that once ignored
a SIGTERM sent right after its start-up line). Here the C-level handler writes the signal
number to a pipe (``signal.set_wakeup_fd``) from whichever thread the kernel chose, and the
main thread reads the pipe: no lock is ever taken in a handler.
"""
from __future__ import annotations

import os
import select
import signal
import time
from collections.abc import Iterable


def _ignore(signum: int, frame: object) -> None:
    """The Python-level handler: the number already went down the pipe."""


class SignalWait:
    """``with SignalWait(signals) as wait: signum = wait.next()``; the previous handlers come back
    on exit. Must be used from the main thread."""

    def __init__(self, signals: Iterable[signal.Signals]) -> None:
        self.signals = tuple(signals)

    def __enter__(self) -> "SignalWait":
        self._read, self._write = os.pipe()
        os.set_blocking(self._write, False)
        self._previous_fd = signal.set_wakeup_fd(self._write, warn_on_full_buffer=False)
        self._previous = {sig: signal.signal(sig, _ignore) for sig in self.signals}
        return self

    def next(self, timeout: float | None = None) -> signal.Signals | None:
        """Block until one of the signals arrives (one that arrived earlier returns at once), or
        ``timeout`` s pass (then ``None``)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([self._read], [], [], left)[0]:
                return None
            received = os.read(self._read, 1)[0]
            if received in self.signals:
                return signal.Signals(received)

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        signal.set_wakeup_fd(self._previous_fd)
        os.close(self._read)
        os.close(self._write)
