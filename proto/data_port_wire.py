"""The data port's framing, shared by the server that holds payloads and the client that reads them.

A sampling reply too large to be worth gRPC-Python's per-byte cost waits on the server's data
port behind a ``DataPortTicket``: the client sends the ticket's ``TICKET_BYTES`` bytes, the server
answers ``HEADER`` (a status byte, then the payload's size as uint64 little-endian) and, when
the status is ``FOUND``, the payload itself. A connection carries any number of such exchanges.
"""
from __future__ import annotations

import struct

TICKET_BYTES = 16
"""A ticket's length: 128 random bits, so one cannot be guessed."""

HEADER = struct.Struct("<BQ")
"""The server's answer to a ticket: status, payload size."""

FOUND = 0
"""The ticket was waiting: its payload follows."""
UNKNOWN = 1
"""No payload waits under the ticket (never issued, already read, or expired); the server
closes the connection after saying so."""
