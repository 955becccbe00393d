"""What an ingest did: one timed step per id-map type, feature attr and edge type."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class IngestStep:
    """One write an ingest made.

    Attributes:
        kind: ``"nodes"`` (id map), ``"features"`` or ``"edges"``.
        name: the node type (``None`` for a homogeneous graph), ``"<type>.<attr>"`` for a
            feature, or the edge type.
        rows: keys mapped, feature rows or edges written.
        seconds: wall time of the write.
    """

    kind: str
    name: str
    rows: int
    seconds: float

    @property
    def rows_per_second(self) -> float:
        """Throughput of the step (``inf`` for a step too fast to time)."""
        return self.rows / self.seconds if self.seconds > 0 else float("inf")

    def summary(self) -> str:
        """``kind  name  rows  seconds  rows/s`` on one line."""
        return (
            f"{self.kind:<8} {self.name:<40} {self.rows:>12,} rows {self.seconds:>9.2f} s "
            f"{self.rows_per_second:>14,.0f} rows/s"
        )


@dataclass
class IngestReport:
    """Every step of one ingest, in the order they ran, and the total wall time."""

    steps: list[IngestStep] = field(default_factory=list)
    seconds: float = 0.0

    def rows(self, kind: str) -> int:
        """Total rows of the steps of ``kind`` (``"nodes"``, ``"features"`` or ``"edges"``)."""
        return sum(step.rows for step in self.steps if step.kind == kind)

    def seconds_of(self, kind: str) -> float:
        """Total seconds of the steps of ``kind``."""
        return sum(step.seconds for step in self.steps if step.kind == kind)

    def summary(self) -> str:
        """One line per step, then a total line."""
        lines = [step.summary() for step in self.steps]
        lines.append(f"{'total':<8} {'':<40} {'':>17} {self.seconds:>9.2f} s")
        return "\n".join(lines)
