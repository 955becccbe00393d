"""Reading the PEM files (certificates, keys, CAs) that TLS settings name."""
from __future__ import annotations

import os
from pathlib import Path

from gnnstore.common.errors import InvalidRequestError


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
