"""Which calls the SDK retries after a server restart, and how long it waits between tries.

The pattern is Flower's ``RetryInvoker``: only a server that cannot be reached is worth
another try, with exponential backoff and full jitter (so trainers that lost one server do not
come back in step) inside one budget of seconds per call. Refusals (bad input, auth, TLS) are
answered the same way every time and are never retried.

A call is retried only where sending it twice leaves the server as sending it once did: every
read, and ``Put`` (it writes the same rows or tensor again). ``Remove`` is not: a second try
would answer "nothing removed" for a tensor the first try removed. Nor is ``WriteGraph``: a
second try would add its edges again, under new edge ids, as another graph version.
"""
from __future__ import annotations

import random
import time

DEFAULT_RETRY_TIMEOUT_S = 60.0
"""Seconds a call keeps retrying while the server is unreachable, unless the caller says."""

IDEMPOTENT_CALLS = frozenset({
    "AdminService.Info",
    "AdminService.Stats",
    "FeatureService.GetTensor",
    "FeatureService.GetTensorSize",
    "FeatureService.ListTensorAttrs",
    "FeatureService.MultiGet",
    "FeatureService.Put",
    "GraphService.GetEdgeIndex",
    "GraphService.HotNodes",
    "GraphService.ListEdgeAttrs",
    "GraphService.SampleFromEdges",
    "GraphService.SampleFromNodes",
    "IdMapService.ToIds",
    "IdMapService.ToKeys",
})
"""``Service.Method`` of every call that may be sent again after an unanswered try."""

NEVER_RETRIED = frozenset({"FeatureService.Remove", "GraphService.WriteGraph"})
"""Calls that are not idempotent; with ``IDEMPOTENT_CALLS`` they name every gnnstore RPC."""


class Backoff:
    """Delays between tries: exponential from ``first_s`` up to ``cap_s``, full jitter, until
    ``budget_s`` seconds have passed since the first failure.

    Args:
        budget_s: seconds from the first failure after which ``next_delay`` gives up.
        first_s: the first delay's upper bound.
        cap_s: the largest delay's upper bound (a restarted server is noticed within it).
    """

    def __init__(self, budget_s: float, *, first_s: float = 0.05, cap_s: float = 0.5) -> None:
        self.budget_s = budget_s
        self._bound = first_s
        self._cap = cap_s
        self._give_up_at = time.monotonic() + budget_s

    def remaining_s(self) -> float:
        """Seconds left of the budget (0 when spent)."""
        return max(0.0, self._give_up_at - time.monotonic())

    def next_delay(self) -> float | None:
        """Seconds to wait before the next try, or ``None`` when the budget is spent."""
        remaining = self.remaining_s()
        if remaining <= 0:
            return None
        delay = random.uniform(0, self._bound)
        self._bound = min(self._cap, self._bound * 2)
        return min(delay, remaining)
