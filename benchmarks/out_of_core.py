"""Features larger than the server's memory: one trainer against a server under a memory limit.

The same graph and trainer (batch 1024, fanouts [15, 10], a 20% static cache, prefetch 2, the
socket and data port only) against the server unconstrained (its features held in memory) and
in memory cgroups limited to shares of the feature bytes (40% and 20% by default), each
started with the page cache emptied of the data directory's files, so every row it reads
that is not within its limit comes from the disk. Per configuration: batches/s and the ratio
to the unconstrained server, the server's CPU, major page faults and storage bytes read a
batch, the storage bytes read per row sent, its peak resident memory, how long its stop took,
and whether the kernel killed it for memory; with ``--rounds N`` every configuration N times,
each limited server against the unconstrained one of its round (this machine's throughput
drifts between runs); and what the disk allows: its rate for the server's own direct reads of
random rows, over the disk bytes a batch.

    python -m benchmarks.out_of_core                   # 1.2M nodes x 1024 float32 (~4.9 GB)
    python -m benchmarks.out_of_core --nodes 300000    # quicker (~1.2 GB)

Needs root for the cgroups (the limited rows are skipped, with the reason, otherwise); writes
``benchmarks/results/out_of_core.md``.
"""
from __future__ import annotations

import argparse
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from benchmarks import memory_cgroup
from benchmarks.loader import Phase, Result, in_fresh_process, peak_rss_mb
from benchmarks.results_page import write_page
from gnnstore.backend.features.feature_tier import CURRENT, TierSnapshot
from gnnstore.backend.server.server_process import ServerProcess

FEATURE_TIER = "feature_tier"


def ingest(data_dir: Path, nodes: int, dim: int, avg_degree: float) -> None:
    """The generated graph into ``data_dir`` (skipped when it already holds it)."""
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "gnnstore", "ingest", "generate", "--nodes", str(nodes), "--features", str(dim),
         "--avg-degree", str(avg_degree), "--classes", "16", "--data-dir", str(data_dir), "--skip-if-done"],
        check=True, stdout=subprocess.DEVNULL,
    )
    print(f"graph: {nodes:,} nodes, {dim} float32 features, ready in {time.perf_counter() - started:.0f} s", flush=True)


def feature_bytes(data_dir: Path) -> int:
    """Bytes of the live feature tier's arrays."""
    return TierSnapshot.open(_live(data_dir)).nbytes


def evict(data_dir: Path) -> None:
    """Drop the data directory's files from the page cache (so a limited server reads them from disk)."""
    for folder, _, files in os.walk(data_dir):
        for name in files:
            try:
                fd = os.open(os.path.join(folder, name), os.O_RDONLY)
            except OSError:
                continue
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def disk_read_rate(data_dir: Path, reads: int = 20_000) -> tuple[float, float]:
    """(MB/s, µs of CPU a row) of the server's own direct reads of random rows of the tier's
    widest array, evicted from the page cache first: what this machine's disk allows."""
    snap = TierSnapshot.open(_live(data_dir), page_cache_bytes=0)
    array = max(snap.arrays.values(), key=lambda a: a.rows[:1].nbytes)
    evict(data_dir)
    ids = np.random.default_rng(0).choice(array.rows.shape[0], min(reads, array.rows.shape[0]), replace=False)
    cpu, started = time.process_time(), time.perf_counter()
    rows = array.gather(ids)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    return rows.nbytes / seconds / 1e6, cpu / len(ids) * 1e6


def _live(data_dir: Path) -> Path:
    tier = data_dir / FEATURE_TIER
    return tier / (tier / CURRENT).read_text().strip()


def run(
    name: str, data_dir: Path, phase: Phase, seeds: torch.Tensor, work: Path, limit: int | None
) -> tuple[Result | None, float, float, int, str]:
    """One configuration: (the trainer's result or ``None`` if the server died, the server's
    peak resident GiB, stop seconds, OOM kills, the server's tier and limit as its start-up
    line says)."""
    evict(data_dir)
    cgroup = memory_cgroup.MemoryCgroup(limit) if limit is not None else None
    launcher = cgroup.launcher if cgroup is not None else []
    try:
        server = ServerProcess(data_dir, "--read-only", log=work / f"{name}.log", startup_timeout=1800,
                               launcher=launcher)
        said = server.startup_line.split(" | feature tier: ", 1)[-1].replace(" | ", "; ")
        result = None
        try:
            result = in_fresh_process(replace(phase, name=name, address=server.address,
                                              server_pid=server.proc.pid), seeds)
        except Exception as exc:  # the server killed for memory: the trainer's calls fail
            print(f"{name}: the trainer failed: {exc}", flush=True)
        peak = peak_rss_mb(server.proc.pid) / 1024  # GiB
        asked = time.perf_counter()
        server.stop()
        stopped = time.perf_counter() - asked
        kills = cgroup.oom_kills() if cgroup is not None else 0
    finally:
        if cgroup is not None:
            cgroup.close()
    return result, peak, stopped, kills, said


def table(
    rows: list[tuple[str, float, Result | None, float, float, int, str]], row_bytes: int, disk_mb_s: float
) -> str:
    """The table's lines: each row's figures, batches/s against ``base``, its round's unconstrained."""
    lines = [
        "| server | batches/s | × unconstrained | the disk allows | server CPU ms/batch | major faults/batch "
        "| disk MB/batch | disk bytes/row sent | wire MB/batch | server peak RSS GiB | stop s | OOM kills "
        "| tier and limit (start-up line) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, base, r, peak, stopped, kills, said in rows:
        if r is None:
            lines.append(f"| {name} | failed | | | | | | | | {peak:.2f} | {stopped:.1f} | {kills} | {said} |")
            continue
        allows = f"{disk_mb_s / r.server_disk_mb:.2f}" if r.server_disk_mb else "-"
        rows_sent = (r.wire_mb_per_batch or 0) * 1e6 / row_bytes
        per_row = (r.server_disk_mb or 0) * 1e6 / rows_sent if rows_sent else 0.0
        lines.append(
            f"| {name} | {r.batches_per_s:.2f} | {r.batches_per_s / base:.2f}× | {allows} | {r.server_cpu_ms:.1f} "
            f"| {r.server_major_faults:,.0f} | {r.server_disk_mb:.1f} | {per_row:,.0f} | {r.wire_mb_per_batch:.1f} "
            f"| {peak:.2f} | {stopped:.1f} | {kills} | {said} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1_200_000)
    parser.add_argument("--dim", type=int, default=1024)
    parser.add_argument("--avg-degree", type=float, default=10.0)
    parser.add_argument("--limits", type=float, nargs="+", default=[0.4, 0.2],
                        help="memory limits as shares of the feature bytes")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--batches", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=1,
                        help="times every configuration runs (the unconstrained server first in each round)")
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="keep the graph here between runs (default: a temporary folder)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    with tempfile.TemporaryDirectory(prefix="gnnstore-out-of-core-") as tmp:
        work = Path(tmp)
        data_dir = args.data_dir or work / "data"
        ingest(data_dir, args.nodes, args.dim, args.avg_degree)
        ServerProcess(data_dir, "--read-only", log=work / "first.log", startup_timeout=3600).stop()  # builds the tier
        nbytes = feature_bytes(data_dir)
        needed = (args.warmup + args.batches) * 1024
        seeds = torch.randperm(args.nodes, generator=torch.Generator().manual_seed(1))[:needed]
        phase = Phase("", "remote", (15, 10), 1024, args.warmup, args.batches, cache_fraction=0.2,
                      policy="static", prefetch=2, shared_memory=False)
        rows, ratios = [], {}
        reason = memory_cgroup.unavailable()
        for round_ in range(1, args.rounds + 1):  # each limited server against the unconstrained one of its round
            result = run("unconstrained", data_dir, phase, seeds, work, None)
            base = result[0].batches_per_s if result[0] is not None else float("nan")
            rows.append((f"round {round_}: unconstrained", base, *result))
            for share in args.limits:
                name = f"limit {share:.0%} of features ({share * nbytes / 2**30:.2f} GiB)"
                if reason is not None:
                    print(f"{name}: skipped ({reason})", flush=True)
                    continue
                limited = run(name, data_dir, phase, seeds, work, int(share * nbytes))
                rows.append((f"round {round_}: {name}", base, *limited))
                rate = limited[0].batches_per_s if limited[0] is not None else 0.0
                ratios.setdefault(name, []).append(rate / base)
        disk_mb_s, cpu_us = disk_read_rate(data_dir)
        medians = "; ".join(f"{name}: {statistics.median(r):.2f}×" for name, r in ratios.items())
        body = table(rows, nbytes // args.nodes, disk_mb_s) + (
            f"\n\nMedian × unconstrained over {args.rounds} round(s): {medians or 'none measured'}."
            f"\n\nThis machine's disk, read as the server reads it (random rows of the widest array, straight "
            f"from disk): {disk_mb_s:.0f} MB/s, {cpu_us:.1f} µs of CPU a row. \"The disk allows\" is that rate "
            "over the disk MB a batch: the most batches/s any reader could get from this disk."
        )
        print("\n" + body)
        command = "python -m benchmarks.out_of_core " + " ".join(sys.argv[1:])
        write_page("out_of_core", "Features larger than the server's memory", command.strip(), (
            f"{args.nodes:,} nodes, {args.dim} float32 features ({nbytes / 2**30:.2f} GiB of feature rows), "
            f"average degree {args.avg_degree}; one trainer: batch 1024, fanouts [15, 10], 20% static cache, "
            f"prefetch 2, socket and data port; {args.batches} batches timed after {args.warmup}. Each server "
            "starts with the data directory evicted from the page cache.\n\n" + body
        ))


if __name__ == "__main__":
    main()
