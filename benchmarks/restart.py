"""How long a server restart stalls training: SIGKILL mid-epoch, restarted at once on the same
port and data (as a supervisor would); the stall is the trainer's longest wait for a batch.

A generated graph (default 100k nodes, average degree 10, 64 float32 features) is served by
``gnnstore serve``; a trainer runs a shuffled ``NodeLoader`` over a ``RemoteNeighborSampler``
(fanouts [15, 10], 512 seeds a batch, a 20% feature cache) plainly or through a
``Prefetcher``. After ``--kill-after`` batches the server is killed and started again. Each row
prints the server's own start-up time (kill to serving), the trainer's stall (the longest wait
for one batch after the kill; batches made ahead arrive without one), the time from serving
to the first batch after it, and the undisturbed median batch time; every epoch is checked to
hold every seed once. First it prints the idle server's private memory (what the kernel charges
it alone: ``Private_Clean + Private_Dirty`` of ``/proc/<pid>/smaps_rollup``) and its RSS.

    nice python -m benchmarks.restart --small   # 20k nodes
    nice python -m benchmarks.restart
"""
from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
import threading
import time
from pathlib import Path

import torch
from torch_geometric.loader import NodeLoader

from gnnstore.backend.server.server_process import ServerProcess, free_port
from gnnstore.client import Prefetcher, RemoteNeighborSampler, connect
from gnnstore.ingest.generator import generate_graph
from gnnstore.ingest.graph_ingest import ingest_graph
from gnnstore.stores.data_dir import open_stores

BATCH_SIZE = 512


def one_epoch(data_dir: Path, port: int, work: Path, seeds: int, prefetch: bool,
              kill_after: int, server: list[ServerProcess], cache_bytes: int) -> dict[str, float]:
    """One epoch with a restart after ``kill_after`` batches; the figures of the row."""
    fs, gs = connect(f"127.0.0.1:{port}", cache_bytes=cache_bytes)
    sampler = RemoteNeighborSampler(fs, [15, 10], feature_store=fs)
    loader = NodeLoader((fs, gs), node_sampler=sampler, input_nodes=torch.arange(seeds),
                        batch_size=BATCH_SIZE, shuffle=True)
    waits, taken, marks = [], [], {}  # waits: (arrival, seconds waited for that batch)

    def restart() -> None:
        server[0] = ServerProcess(data_dir, "--read-only", "--port", str(port),
                                  log=work / f"server-{time.monotonic_ns()}.log")
        marks["serving"] = time.monotonic()

    restarter = None
    last = time.monotonic()
    for i, batch in enumerate(Prefetcher(loader, depth=2) if prefetch else loader):
        now = time.monotonic()
        waits.append((now, now - last))
        taken.append(batch.n_id[: batch.batch_size])
        if i == kill_after:
            server[0].proc.kill()
            server[0].stop()
            marks["killed"] = time.monotonic()
            restarter = threading.Thread(target=restart)
            restarter.start()
        last = time.monotonic()
    restarter.join()
    assert torch.equal(torch.cat(taken).sort().values, torch.arange(seeds)), "a seed was lost or repeated"
    after = waits[kill_after + 1:]  # batches made ahead before the kill arrive without a wait
    return {
        "startup_s": marks["serving"] - marks["killed"],
        "stall_s": max(wait for _, wait in after),
        "back_s": min(arrival for arrival, _ in after if arrival > marks["serving"]) - marks["serving"],
        "batch_ms": 1e3 * statistics.median(wait for _, wait in waits[1:kill_after + 1]),
        "retries": fs.connection.retries,
    }


def idle_memory(pid: int) -> tuple[int, int]:
    """A process's private bytes (``Private_Clean + Private_Dirty``) and its RSS, in bytes."""
    fields = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        name, value, *_ = line.split()
        fields[name.rstrip(":")] = int(value) * 1024
    return fields["Private_Clean"] + fields["Private_Dirty"], fields["Rss"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--kill-after", type=int, default=10)
    parser.add_argument("--small", action="store_true", help="20k nodes")
    args = parser.parse_args()
    if args.small:
        args.nodes = 20_000
    logging.basicConfig(level=logging.ERROR)
    seeds = min(args.nodes, 40 * BATCH_SIZE)
    with tempfile.TemporaryDirectory(prefix="gnnstore-restart-") as tmp:
        work = Path(tmp)
        graph = generate_graph(args.nodes, 10.0, 64, 8, seed=1)
        with open_stores(work / "data") as stores:
            ingest_graph(graph, stores)
        port = free_port()
        started = time.monotonic()
        server = [ServerProcess(work / "data", "--read-only", "--port", str(port), log=work / "first.log")]
        serving_s = time.monotonic() - started
        time.sleep(2.0)  # idle: past its start-up work
        private, rss = idle_memory(server[0].proc.pid)
        print(f"First start (it builds the topology snapshot and the feature tier): {serving_s:.2f} s; "
              f"idle, it holds {private / 2**20:.0f} MB private memory (RSS {rss / 2**20:.0f} MB).")
        cache_bytes = args.nodes * 64 * 4 // 5
        print(f"Graph: {args.nodes:,} nodes, avg degree 10, 64 float32 features; {seeds:,} seeds "
              f"in batches of {BATCH_SIZE}, fanouts [15, 10], 20% cache; kill after batch {args.kill_after}.")
        print("| trainer | round | server start-up (kill → serving) | stall (longest wait for a batch) "
              "| serving → next batch | undisturbed batch | retries |")
        print("|---|---|---|---|---|---|---|")
        try:
            for round_ in range(1, args.rounds + 1):
                for prefetch in (False, True):
                    row = one_epoch(work / "data", port, work, seeds, prefetch, args.kill_after, server,
                                    cache_bytes)
                    name = "Prefetcher(depth=2)" if prefetch else "plain loop"
                    print(f"| {name} | {round_} | {row['startup_s']:.2f} s | {row['stall_s']:.2f} s "
                          f"| {row['back_s']:.2f} s | {row['batch_ms']:.1f} ms | {row['retries']} |", flush=True)
        finally:
            server[0].stop()


if __name__ == "__main__":
    main()
