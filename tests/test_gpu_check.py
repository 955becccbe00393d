"""benchmarks.gpu, the check a GPU machine runs (CI has none): on a tiny graph here, every CPU row
yields figures, none fails, and every CUDA row says why it is skipped, so the check still works
the day a GPU session runs it."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
SMALL = ["--nodes", "6000", "--avg-degree", "5", "--dim", "8", "--batch-size", "64", "--warmup", "1",
         "--batches", "3", "--train-batches", "2", "--no-page"]


def test_the_gpu_check_makes_its_table_on_the_cpu() -> None:
    run = subprocess.run([sys.executable, "-m", "benchmarks.gpu", *SMALL], cwd=ROOT, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    rows = {line.split("|")[1].strip(): line for line in run.stdout.splitlines() if line.startswith("| ")}
    assert "failed:" not in run.stdout
    for name in ("in-memory: gnnstore engine (cpu)", "remote: static 20%, prefetch 2 (cpu)",
                 "remote: static 20%, prefetch 2, socket only (cpu)", "train epoch: in memory (cpu)",
                 "train epoch: remote static+sieve 20%, prefetch 2 (cpu)"):
        cells = [c.strip() for c in rows[name].split("|")[2:-1]]
        assert re.fullmatch(r"\d+\.\d\d", cells[0]) and float(cells[0]) > 0, rows[name]  # batches/s
    assert re.fullmatch(r"\d+\.\d\d×", rows["remote: static 20%, prefetch 2 (cpu)"].split("|")[6].strip())
    if not torch.cuda.is_available():
        assert "no CUDA device" in rows["CUDA tests"] and "no CUDA device" in rows["every CUDA row"]
    # --no-page left the committed page alone (a page it wrote would name --no-page in its command)
    assert "--no-page" not in (ROOT / "benchmarks" / "results" / "gpu.md").read_text()
