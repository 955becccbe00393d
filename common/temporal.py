"""Temporal sampling's options, as the client, the wire and the server all name them."""
from __future__ import annotations

from dataclasses import dataclass

TEMPORAL_STRATEGIES = ("uniform", "last")
"""PyG's ``temporal_strategy``: draw among the allowed neighbours, or take the latest ``k``."""


@dataclass(frozen=True)
class TemporalOptions:
    """A request's temporal sampling: the node attribute holding times, and PyG's strategy."""

    time_attr: str
    strategy: str = "uniform"
