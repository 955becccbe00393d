"""Whether an address is this host's loopback: what both sides decide security defaults by."""
from __future__ import annotations


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a literal loopback address or ``localhost`` (names that resolve to
    loopback do not count: what a name resolves to can change)."""
    host = host.strip("[]")
    return host == "localhost" or host.startswith("127.") or host == "::1"
