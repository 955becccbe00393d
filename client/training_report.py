"""A trainer's per-epoch report: one printed line an epoch, a JSON file and a PNG of the run.

It records the four figures GNN scaling is judged by: memory (process RSS, and peak GPU memory
when training on CUDA), time per epoch (with batches/s and the share of it spent waiting for
data), FLOPs per batch (matmuls, as ``torch.utils.flop_counter`` counts them) and convergence
(loss, accuracy, and the time until a target accuracy is first reached)::

    report = TrainingReport(target_accuracy=0.8, device=device)
    for epoch in range(epochs):
        report.start_epoch()
        ...  # train; optionally report.count_flops(lambda: train_step(batch)) on one batch
        report.end_epoch(loss=..., accuracy=..., batches=n, stall_fraction=...,
                         cache=fs.cache.stats())
        print(report.validated(evaluate(...)).line())  # optional; not timed as the epoch
    json_path, png_path = report.save("reports", "run")
"""
from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil
import torch
from torch.utils.flop_counter import FlopCounterMode

from gnnstore.client.feature_cache import CacheStats

FLOPS_NOTE = ("matmul FLOPs of one training step (forward and backward) as torch.utils.flop_counter "
              "counts them; message passing's gathers and scatters are not counted")


@dataclass(frozen=True)
class EpochRecord:
    """One epoch's figures; hit rates are shares of the epoch's cache lookups (``None``: no cache)."""

    epoch: int
    elapsed_s: float
    seconds: float
    batches: int
    loss: float
    accuracy: float
    val_accuracy: float | None
    stall_fraction: float
    cache_hit_rate: float | None
    static_hit_rate: float | None
    dynamic_hit_rate: float | None
    rss_bytes: int
    gpu_peak_bytes: int | None
    note: str = ""

    @property
    def batches_per_s(self) -> float:
        """Mini-batches per second of the epoch's wall time."""
        return self.batches / self.seconds if self.seconds else 0.0

    def line(self) -> str:
        """The epoch as one printed line."""
        parts = [f"epoch {self.epoch}: loss {self.loss:.4f}", f"train acc {self.accuracy:.3f}"]
        if self.val_accuracy is not None:
            parts.append(f"val acc {self.val_accuracy:.3f}")
        parts += [f"{self.seconds:.1f} s", f"{self.batches_per_s:.1f} batches/s",
                  f"stall {self.stall_fraction:.1%}"]
        if self.cache_hit_rate is not None:
            parts.append(f"cache hits {self.cache_hit_rate:.1%} (static {self.static_hit_rate:.1%}, "
                         f"dynamic {self.dynamic_hit_rate:.1%})")
        parts.append(f"RSS {self.rss_bytes / 2**20:.0f} MiB")
        if self.gpu_peak_bytes is not None:
            parts.append(f"GPU peak {self.gpu_peak_bytes / 2**20:.0f} MiB")
        return "  ".join(parts) + (f"  ({self.note})" if self.note else "")


class TrainingReport:
    """Collects :class:`EpochRecord` s of one training run and writes them as JSON and a PNG."""

    def __init__(self, *, target_accuracy: float | None = None,
                 device: torch.device | str = "cpu") -> None:
        """
        Args:
            target_accuracy: the accuracy whose first reaching is timed (validation accuracy
                when epochs give one, else training accuracy); ``None``: not timed.
            device: the training device; on CUDA each epoch's peak GPU memory is recorded.
        """
        self.target_accuracy = target_accuracy
        self.device = torch.device(device)
        self.epochs: list[EpochRecord] = []
        self.flops_per_batch: int | None = None
        self._started = time.perf_counter()
        self._epoch_started: float | None = None
        self._process = psutil.Process(os.getpid())

    def start_epoch(self) -> None:
        """Mark an epoch's start (and reset the GPU's peak-memory counter)."""
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
        self._epoch_started = time.perf_counter()

    def count_flops(self, step: Callable[[], object]) -> object:
        """Run ``step`` (one training step) under a FLOP counter, keep its count, return its result."""
        with FlopCounterMode(display=False) as counter:
            result = step()
        self.flops_per_batch = counter.get_total_flops()
        return result

    def end_epoch(
        self, *, loss: float, accuracy: float, batches: int, stall_fraction: float = 0.0,
        cache: CacheStats | None = None, note: str = "",
    ) -> EpochRecord:
        """Record the epoch begun by :meth:`start_epoch` and return it.

        Args:
            note: printed after the line, e.g. that the epoch includes one-time compilation.

        Raises:
            RuntimeError: no epoch was started.
        """
        if self._epoch_started is None:
            raise RuntimeError("end_epoch() without start_epoch()")
        now = time.perf_counter()
        lookups = None if cache is None else max(cache.hits + cache.misses, 1)
        record = EpochRecord(
            epoch=len(self.epochs) + 1,
            elapsed_s=now - self._started,
            seconds=now - self._epoch_started,
            batches=batches,
            loss=loss,
            accuracy=accuracy,
            val_accuracy=None,
            stall_fraction=stall_fraction,
            cache_hit_rate=None if cache is None else cache.hit_rate,
            static_hit_rate=None if cache is None else cache.static_hits / lookups,
            dynamic_hit_rate=None if cache is None else cache.dynamic_hits / lookups,
            rss_bytes=self._process.memory_info().rss,
            gpu_peak_bytes=(torch.cuda.max_memory_allocated(self.device)
                            if self.device.type == "cuda" else None),
            note=note,
        )
        self.epochs.append(record)
        self._epoch_started = None
        return record

    def validated(self, accuracy: float) -> EpochRecord:
        """Add the last epoch's validation accuracy (measured after its clock stopped)."""
        self.epochs[-1] = dataclasses.replace(self.epochs[-1], val_accuracy=accuracy)
        return self.epochs[-1]

    @property
    def time_to_target_s(self) -> float | None:
        """Seconds from the report's start to the end of the first epoch at the target, if any."""
        if self.target_accuracy is None:
            return None
        for record in self.epochs:
            reached = record.accuracy if record.val_accuracy is None else record.val_accuracy
            if reached >= self.target_accuracy:
                return record.elapsed_s
        return None

    def to_dict(self) -> dict:
        """The whole report as plain JSON values."""
        return {
            "device": str(self.device),
            "target_accuracy": self.target_accuracy,
            "time_to_target_s": self.time_to_target_s,
            "flops_per_batch": self.flops_per_batch,
            "flops_note": FLOPS_NOTE if self.flops_per_batch is not None else None,
            "epochs": [dataclasses.asdict(record) | {"batches_per_s": record.batches_per_s}
                       for record in self.epochs],
        }

    def save(self, directory: str | os.PathLike, name: str = "training-report") -> tuple[Path, Path]:
        """Write ``<name>.json`` and ``<name>.png`` into ``directory`` (created); return both paths."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        json_path, png_path = directory / f"{name}.json", directory / f"{name}.png"
        json_path.write_text(json.dumps(self.to_dict(), indent=2) + "\n")
        self._plot(png_path)
        return json_path, png_path

    def _plot(self, path: Path) -> None:
        """Loss and accuracy against wall time, throughput and memory against the epoch."""
        import matplotlib

        matplotlib.use("Agg")  # files only: no display needed
        import matplotlib.pyplot as plt

        epochs = [r.epoch for r in self.epochs]
        elapsed = [r.elapsed_s for r in self.epochs]
        fig, ((loss_ax, acc_ax), (rate_ax, mem_ax)) = plt.subplots(2, 2, figsize=(11, 7))
        loss_ax.plot(elapsed, [r.loss for r in self.epochs], marker="o")
        loss_ax.set(title="training loss", xlabel="seconds since start", ylabel="loss")
        acc_ax.plot(elapsed, [r.accuracy for r in self.epochs], marker="o", label="train")
        if any(r.val_accuracy is not None for r in self.epochs):
            acc_ax.plot(elapsed, [r.val_accuracy for r in self.epochs], marker="o", label="validation")
        if self.target_accuracy is not None:
            acc_ax.axhline(self.target_accuracy, linestyle="--", color="grey", label="target")
        acc_ax.set(title="accuracy", xlabel="seconds since start", ylabel="accuracy")
        acc_ax.legend()
        rate_ax.bar(epochs, [r.batches_per_s for r in self.epochs], label="batches/s")
        rate_ax.set(title="throughput (stall share on the right axis)", xlabel="epoch", ylabel="batches/s",
                    xticks=epochs)
        stall_ax = rate_ax.twinx()
        stall_ax.plot(epochs, [100 * r.stall_fraction for r in self.epochs], color="tab:red", marker="o")
        stall_ax.set_ylabel("stall %")
        mem_ax.plot(epochs, [r.rss_bytes / 2**20 for r in self.epochs], marker="o", label="process RSS")
        if any(r.gpu_peak_bytes is not None for r in self.epochs):
            mem_ax.plot(epochs, [r.gpu_peak_bytes / 2**20 for r in self.epochs], marker="o", label="GPU peak")
        mem_ax.set(title="memory", xlabel="epoch", ylabel="MiB", xticks=epochs)
        mem_ax.set_ylim(bottom=0)
        mem_ax.legend()
        fig.tight_layout()
        fig.savefig(path, dpi=100)
        plt.close(fig)
