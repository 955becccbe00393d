"""What client and server share about the network: loopback addresses and TLS files."""
from __future__ import annotations

import os
from pathlib import Path

from gnnstore.common.errors import InvalidRequestError

RETRY_KEY = "gnnstore-retry"
"""Request-metadata key whose value is the try's number (1, 2, …) when a call is a retry."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a literal loopback address or ``localhost`` (names that resolve to
    loopback do not count: what a name resolves to can change)."""
    host = host.strip("[]")
    return host == "localhost" or host.startswith("127.") or host == "::1"


def read_pem(path: str | os.PathLike, setting: str) -> bytes:
    """The bytes of a PEM file (certificate, key or CA), named in errors by its ``setting``.

    Raises:
        InvalidRequestError: the file cannot be read or holds no PEM block.
    """
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise InvalidRequestError(f"{setting} cannot be read: {exc.strerror}") from None
    if b"-----BEGIN " not in data:
        raise InvalidRequestError(f"{setting} is not a PEM file (no '-----BEGIN' line)")
    return data
