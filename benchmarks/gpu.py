"""The prepared GPU check: the CUDA tests, the loader's target row and a GraphSAGE epoch, on
the CPU and on the GPU, in one table.

``scripts/gpu-check.sh`` runs it on a GPU machine (Python 3.12 with torch and PyG, no network,
the other wheels carried; ``scripts/gpu-wheels.sh`` fetches them here). Without a CUDA device
the CPU rows run and every CUDA row says why it was skipped, so the check's CPU half runs
anywhere:

* the tests that need a device (``-k cuda`` over the files that hold them), as a pass/fail row;
* in memory: gnnstore's engine samples over the tensors (PyG's ``NeighborLoader`` where pyg-lib
  or torch-sparse is installed) and each batch goes to the device;
* through a real ``gnnstore serve`` (the loader benchmark's target row): a 20% static cache on
  the device, prefetch 2 onto the device, shared-memory replies and socket only;
* a GraphSAGE epoch (``benchmarks.loader``'s model) in memory and through the server.

Per row: batches/s, its ratio to the in-memory row of the same device, the trainer's and the
server's CPU a batch, the two-host projection (the in-memory engine's CPU a batch over the larger
of the trainer's and the server's), p99 of the wait for a batch. Writes ``benchmarks/results/gpu.md`` (and a
copy into ``$OUT`` where that is set, as on the device machine).

    python -m benchmarks.gpu --nodes 100000 --batches 40 --train-batches 20  # the CPU half: minutes
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import torch

from benchmarks.loader import (
    ENGINE,
    NUM_CLASSES,
    SOCKET_ONLY,
    TARGET,
    Phase,
    Result,
    graph_arguments,
    in_fresh_process,
    prepare,
    two_host_projection,
)
from benchmarks.results_page import write_page
from gnnstore.backend.server.server_process import ServerProcess

ROOT = Path(__file__).resolve().parent.parent
CUDA_TESTS = ["tests/client/test_cuda_batches.py", "tests/client/test_feature_cache.py",
              "tests/client/test_prefetch.py"]
"""The files that hold the tests needing a device (each such test has ``cuda`` in its name)."""
CUDA_TESTS_TIMEOUT_S = 240
"""The tests' share of the check's 8 minutes (they take well under one on the CPU)."""
TRAIN_IN_MEMORY = "train epoch: in memory"
TRAIN_REMOTE = "train epoch: remote static+sieve 20%, prefetch 2"
NO_CUDA = "skipped: no CUDA device (torch.cuda.is_available() is False)"


def cuda_tests() -> str:
    """The CUDA tests' outcome in a few words (pytest's summary line)."""
    if not torch.cuda.is_available():
        return NO_CUDA
    try:
        run = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "cuda", *CUDA_TESTS],
            cwd=ROOT, capture_output=True, text=True, check=False, timeout=CUDA_TESTS_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        return f"failed: still running after {CUDA_TESTS_TIMEOUT_S} s"
    print(run.stdout[-4000:] + run.stderr[-2000:], flush=True)
    lines = run.stdout.strip().splitlines()
    return lines[-1].strip("= ") if lines else f"pytest exited {run.returncode} without a summary"


def device_rows(common: Phase, remote: Phase, device: str, train_batches: int) -> list[Phase]:
    """The rows of one device, the in-memory baselines first."""
    engine = replace(common, name=f"{ENGINE} ({device})", kind="engine", device=device)
    rows = [engine]
    if any(importlib.util.find_spec(m) for m in ("pyg_lib", "torch_sparse")):
        rows.append(replace(engine, name=f"in-memory: PyG NeighborLoader ({device})", kind="pyg"))
    target = replace(remote, name=f"{TARGET} ({device})", cache_fraction=0.2, policy="static", prefetch=2,
                     device=device)
    train = replace(engine, name=f"{TRAIN_IN_MEMORY} ({device})", batches=train_batches, warmup=0, train=True)
    return rows + [
        target,
        replace(target, name=f"{SOCKET_ONLY} ({device})", shared_memory=False),
        train,
        replace(train, name=f"{TRAIN_REMOTE} ({device})", kind="remote", graph_file="", address=remote.address,
                server_pid=remote.server_pid, cache_fraction=0.2, prefetch=2),
    ]


def run_rows(phases: list[Phase], seeds: torch.Tensor) -> tuple[list[Result], dict[str, str]]:
    """Each row in a fresh process; a row that fails is kept as its error, and the rest still run
    (a GPU machine's time is short: one failure must not cost the whole table)."""
    results, failed = [], {}
    for phase in phases:
        try:
            results.append(in_fresh_process(phase, seeds))
        except Exception as error:  # noqa: BLE001 - reported in the table
            failed[phase.name] = f"{type(error).__name__}: {error}".replace("\n", " ").replace("|", "/")[:300]
            print(f"{phase.name}: failed: {failed[phase.name]}", flush=True)
    return results, failed


def table(results: list[Result], failed: dict[str, str], tests: str, devices: list[str]) -> str:
    """One Markdown table: the tests' row, then each device's rows against its in-memory ones,
    then the rows that failed."""
    lines = [
        "| row | batches/s | × in memory | CPU ms/batch: trainer | server | two-host projection | p99 wait ms |",
        "|---|---|---|---|---|---|---|",
        f"| CUDA tests | {tests} | | | | | |",
    ]
    for device in devices:
        rows = [r for r in results if r.phase.device == device]
        base = {train: next((r for r in rows if r.phase.kind == "engine" and r.phase.train == train), None)
                for train in (False, True)}
        for r in rows:
            engine = base[r.phase.train]
            ratio = "—" if engine is None else f"{r.batches_per_s / engine.batches_per_s:.2f}"
            remote = r.server_cpu_ms is not None and engine is not None
            server = f"{r.server_cpu_ms:.1f}" if r.server_cpu_ms is not None else "—"
            projection = f"{two_host_projection(engine, r):.2f}×" if remote else "—"
            lines.append(
                f"| {r.phase.name} | {r.batches_per_s:.2f} | {ratio} | {r.trainer_cpu_ms:.1f} | {server} | "
                f"{projection} | {r.p99_ms:.1f} |"
            )
    lines += [f"| {name} | failed: {why} | | | | | |" for name, why in failed.items()]
    if "cuda" not in devices:
        lines.append(f"| every CUDA row | {NO_CUDA} | | | | | |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    graph_arguments(parser)
    parser.set_defaults(nodes=300_000)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--fanouts", type=int, nargs="+", default=[15, 10])
    parser.add_argument("--warmup", type=int, default=10, help="batches before timing (fills caches)")
    parser.add_argument("--batches", type=int, default=100, help="batches timed per loader row")
    parser.add_argument("--train-batches", type=int, default=50, help="batches of the training epoch")
    parser.add_argument("--no-page", action="store_true", help="print the table only (the suite's smoke run)")
    args = parser.parse_args()
    devices = ["cpu", *(["cuda"] if torch.cuda.is_available() else [])]
    print(f"torch {torch.__version__}, devices {devices}"
          + (f" ({torch.cuda.get_device_name()})" if len(devices) > 1 else ""), flush=True)
    tests = cuda_tests()
    print(f"CUDA tests: {tests}", flush=True)
    with tempfile.TemporaryDirectory(prefix="gnnstore-gpu-") as tmp:
        work = Path(tmp)
        (work / "graph").mkdir()
        tensors, data_dir, train_ids = prepare(
            args.nodes, args.avg_degree, args.dim, args.out_degree_exponent, work / "graph"
        )
        needed = (args.warmup + max(args.batches, args.train_batches)) * args.batch_size
        if train_ids.numel() < needed:
            parser.error(f"{args.nodes:,} nodes have {train_ids.numel():,} training seeds, fewer than the "
                         f"{needed:,} the batches asked for need: ask for more --nodes or fewer --batches")
        order = torch.randperm(train_ids.numel(), generator=torch.Generator().manual_seed(1))
        seeds = train_ids[order][:needed]
        common = Phase("", "", tuple(args.fanouts), args.batch_size, args.warmup, args.batches,
                       graph_file=str(tensors))
        with ServerProcess(data_dir, "--read-only", log=work / "server.log", startup_timeout=600) as server:
            remote = replace(common, kind="remote", graph_file="", address=server.address,
                             server_pid=server.proc.pid)
            results, failed = run_rows(
                [phase for device in devices for phase in device_rows(common, remote, device, args.train_batches)],
                seeds,
            )
    text = table(results, failed, tests, devices)
    summary = (f"\nGraph: {args.nodes:,} nodes, ~{int(args.nodes * args.avg_degree):,} edges, {args.dim} float32 "
               f"features, {NUM_CLASSES} classes; {args.batch_size} seeds a batch, fanouts {args.fanouts}; "
               f"{args.batches} timed batches a loader row after {args.warmup} warm-up, {args.train_batches} "
               f"a training epoch. torch {torch.__version__}"
               + (f", {torch.cuda.get_device_name()}" if "cuda" in devices else "") + ".\n")
    print("\n" + text + summary, flush=True)
    if args.no_page:
        return
    command = " ".join(["python -m benchmarks.gpu", *sys.argv[1:]])
    page = write_page("gpu", "The GPU check: loading and training on the CPU and on the GPU", command,
                      text + "\n" + summary)
    if os.environ.get("OUT"):
        shutil.copy(page, Path(os.environ["OUT"]) / page.name)
    print(f"wrote {page}")


if __name__ == "__main__":
    main()
