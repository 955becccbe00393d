"""Many trainers, one server: total batches/s of ``examples/ddp_node_classification.py`` with 1,
2 and 4 ranks, and the share of the machine's CPU the server took meanwhile.

A generated graph (default 50k nodes, average degree 10, 64 float32 features) is served by
one ``gnnstore serve``; each row runs the DDP example (batch 512, fanouts [10, 5], 3 epochs)
and reports its last epoch's batches/s over all ranks, and the server's CPU seconds during
the whole row (start-up, 3 epochs, evaluation) beside the row's wall time.

    nice python -m benchmarks.ddp
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from gnnstore.backend.server.server_process import ServerProcess
from gnnstore.ingest.generator import generate_graph
from gnnstore.ingest.graph_ingest import ingest_graph
from gnnstore.stores.data_dir import open_stores

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "ddp_node_classification.py"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=50_000)
    parser.add_argument("--ranks", type=int, nargs="+", default=[1, 2, 4])
    args = parser.parse_args()
    cores = len(os.sched_getaffinity(0))
    with tempfile.TemporaryDirectory(prefix="gnnstore-ddp-") as tmp:
        with open_stores(Path(tmp) / "data") as stores:
            ingest_graph(generate_graph(args.nodes, 10.0, 64, 8, seed=1), stores)
        with ServerProcess(Path(tmp) / "data", "--read-only", log=Path(tmp) / "server.log") as server:
            process = psutil.Process(server.proc.pid)
            print(f"{args.nodes:,} nodes, {cores} cores.\n| ranks | batches/s, all ranks (last epoch) "
                  "| per rank | server CPU s | row wall s |\n|---|---|---|---|---|")
            for ranks in args.ranks:
                cpu, started = process.cpu_times(), time.perf_counter()
                result = subprocess.run(
                    [sys.executable, str(EXAMPLE), "--address", server.address, "--world-size", str(ranks),
                     "--epochs", "3", "--batch-size", "512"],
                    capture_output=True, text=True, check=True,
                )
                wall, after = time.perf_counter() - started, process.cpu_times()
                server_cpu = after.user + after.system - cpu.user - cpu.system
                last = [line for line in result.stdout.splitlines() if line.startswith("epoch")][-1]
                total, per_rank = re.search(r"([\d.]+) batches/s in all \(per rank: ([^)]*)\)", last).groups()
                print(f"| {ranks} | {total} | {per_rank} | {server_cpu:.1f} | {wall:.1f} |", flush=True)


if __name__ == "__main__":
    main()
