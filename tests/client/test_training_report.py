"""TrainingReport: what it records per epoch, the time to a target, FLOPs, and its files."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from gnnstore.client import CacheStats, TrainingReport


def _epoch(report: TrainingReport, accuracy: float, val: float | None = None, cache: CacheStats | None = None):
    report.start_epoch()
    record = report.end_epoch(loss=1.0 - accuracy, accuracy=accuracy, batches=10, stall_fraction=0.25,
                              cache=cache)
    return record if val is None else report.validated(val)


def test_the_target_is_timed_on_validation_accuracy_when_there_is_one() -> None:
    report = TrainingReport(target_accuracy=0.7)
    _epoch(report, 0.9, val=0.5)  # training accuracy past the target, validation not
    assert report.time_to_target_s is None
    second = _epoch(report, 0.9, val=0.75)
    assert report.time_to_target_s == second.elapsed_s
    trained_only = TrainingReport(target_accuracy=0.7)
    first = _epoch(trained_only, 0.8)
    assert trained_only.time_to_target_s == first.elapsed_s


def test_an_epoch_records_cache_tiers_memory_and_its_line() -> None:
    report = TrainingReport()
    record = _epoch(report, 0.5, cache=CacheStats(hits=30, misses=70, static_hits=20, dynamic_hits=10))
    assert (record.cache_hit_rate, record.static_hit_rate, record.dynamic_hit_rate) == (0.3, 0.2, 0.1)
    assert record.rss_bytes > 0 and record.gpu_peak_bytes is None  # CPU: no GPU figure
    assert record.batches_per_s == pytest.approx(10 / record.seconds)
    line = record.line()
    assert line.startswith("epoch 1: loss 0.5000") and "cache hits 30.0% (static 20.0%, dynamic 10.0%)" in line
    with pytest.raises(RuntimeError, match="start_epoch"):
        report.end_epoch(loss=0.0, accuracy=0.0, batches=0)


def test_flops_are_counted_for_one_step_and_saved_with_the_epochs(tmp_path: Path) -> None:
    report = TrainingReport()
    layer = torch.nn.Linear(64, 32)
    out = report.count_flops(lambda: layer(torch.randn(128, 64)).sum().backward())
    assert out is None
    assert report.flops_per_batch == 2 * (2 * 128 * 64 * 32)  # forward, and the weight gradient
    _epoch(report, 0.5)
    json_path, png_path = report.save(tmp_path / "reports", "run")
    saved = json.loads(json_path.read_text())
    assert saved["flops_per_batch"] == report.flops_per_batch and saved["epochs"][0]["batches"] == 10
    assert png_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
