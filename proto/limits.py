"""Wire limits both sides set, so a client mirrors the server it talks to."""
from __future__ import annotations

MIN_MAX_MESSAGE_BYTES = 256 << 20
"""The smallest message limit a server may be configured with (256 MiB)."""

DEFAULT_MAX_MESSAGE_BYTES = 256 << 20
"""Send and receive limit for one message; gRPC's own default (4 MB) is far below a batch."""

DEFAULT_CHUNK_BYTES = 1 << 20
"""Bytes per chunk of a streamed tensor or edge list (~1 MiB streams fastest on loopback)."""
