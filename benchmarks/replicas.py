"""Many servers, many trainers: a primary and 0, 1 and 2 ``--replica`` servers over one data
directory, fed by 2 and 4 trainer processes, each connected to every server (gRPC ``round_robin``).

A generated graph (default 50k nodes, average degree 10, 64 float32 features) is ingested once.
Each row starts its servers, runs ``--batches`` batches in each trainer process (a ``NodeLoader``
over a ``RemoteNeighborSampler``, batch 512, fanouts [15, 10], no cache, shared memory) and
reports the aggregate batches/s, each process's CPU seconds a batch (servers together, and a
trainer), and how the sampling calls split over the servers. A last row SIGKILLs the replica of
two servers while 2 trainers run and reports the longest wait for a batch after the kill. Then
the replication lag: one-row Puts and one-edge graph writes at the primary, each timed from its
acknowledgement until the replica serves it.

On a machine with few cores the servers and trainers share them, so batches/s does not grow
with servers here; the CPU a batch does not depend on that, and gives the capacity model: one
server core serves ``1 / (server CPU s a batch)`` batches/s, so it feeds that many divided by a
trainer's batch rate.

    nice python -m benchmarks.replicas            # writes benchmarks/results/replicas.md
"""
from __future__ import annotations

import argparse
import multiprocessing
import signal
import statistics
import tempfile
import time
from pathlib import Path
from queue import Empty

import psutil
import torch

from benchmarks.loader import cpu_seconds
from benchmarks.results_page import write_page
from gnnstore.backend.server.server_process import ServerProcess
from gnnstore.client import GraphWriter, connect, server_info, server_stats
from gnnstore.ingest.generator import generate_graph
from gnnstore.ingest.graph_ingest import ingest_graph
from gnnstore.stores.data_dir import open_stores

SAMPLE = "/gnnstore.v1.GraphService/SampleFromNodes"
BATCH, FANOUTS = 512, [15, 10]


def trainer(addresses: list[str], nodes: int, batches: int, seed: int, ready, started, done, queue) -> None:
    """One trainer process: says ``ready`` after a warm-up batch, waits for ``started``, makes
    ``batches`` batches (counting them in ``done``) and puts (CPU s, waits) on ``queue``."""
    from torch_geometric.loader import NodeLoader

    from gnnstore.client import RemoteNeighborSampler, connect

    torch.set_num_threads(1)
    fs, gs = connect(addresses)
    sampler = RemoteNeighborSampler(fs, FANOUTS, seed=seed, feature_store=fs)
    loader = NodeLoader((fs, gs), node_sampler=sampler, input_nodes=torch.randperm(nodes)[: (batches + 6) * BATCH],
                        batch_size=BATCH)
    warm = iter(loader)
    for _ in range(2 * len(addresses)):  # round robin: every server has sampled before the clock starts
        next(warm)
    ready.put(True)
    started.wait()
    cpu, waits, last = time.process_time(), [], time.monotonic()
    for _, batch in zip(range(batches), loader):
        waits.append(time.monotonic() - last)
        _ = batch.x.sum()
        with done.get_lock():
            done.value += 1
        last = time.monotonic()
    queue.put((time.process_time() - cpu, waits))


def take(queue, procs: list) -> object:
    """The next item on ``queue``; raises if a trainer died instead."""
    while True:
        try:
            return queue.get(timeout=1.0)
        except Empty:
            failed = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
            if failed:
                raise RuntimeError(f"a trainer process failed (exit codes {failed}); its traceback is above")


def servers_cpu_seconds(servers: list[ServerProcess]) -> float:
    return sum(cpu_seconds(psutil.Process(server.proc.pid)) for server in servers)


def run_row(data_dir: Path, log_dir: Path, n_servers: int, n_trainers: int, nodes: int, batches: int,
            kill: bool = False) -> dict:
    """Start the servers and trainers of one row; its figures. ``kill``: SIGKILL the last
    server once a third of the row's batches are made."""
    servers = [ServerProcess(data_dir, *(["--replica"] if i else []), log=log_dir / f"server-{n_servers}-{i}.log")
               for i in range(n_servers)]
    addresses = [s.address for s in servers]
    context = multiprocessing.get_context("spawn")
    ready, started, done, queue = context.Queue(), context.Event(), context.Value("i", 0), context.Queue()
    procs = [context.Process(target=trainer, args=(addresses, nodes, batches, 100 + i, ready, started, done, queue))
             for i in range(n_trainers)]
    for proc in procs:
        proc.start()
    for _ in procs:
        take(ready, procs)
    before_calls = [server_stats(a).get(SAMPLE) for a in addresses]
    before_cpu = servers_cpu_seconds(servers)
    wall = time.monotonic()
    started.set()
    total = n_trainers * batches
    if kill:
        while done.value < total // 3:
            time.sleep(0.001)
        servers[-1].proc.send_signal(signal.SIGKILL)
    results = [take(queue, procs) for _ in procs]
    wall = time.monotonic() - wall
    for proc in procs:
        proc.join()
    live = [s for s in servers if s.proc.poll() is None]
    server_cpu = float("nan") if kill else servers_cpu_seconds(live) - before_cpu
    calls = [(server_stats(a).get(SAMPLE).requests - (b.requests if b else 0)) if s in live else None
             for s, a, b in zip(servers, addresses, before_calls)]
    for server in servers:
        server.stop()
    row = {
        "servers": n_servers, "trainers": n_trainers, "batches_per_s": total / wall,
        "server_cpu_ms": 1e3 * server_cpu / total,
        "trainer_cpu_ms": 1e3 * statistics.median(cpu / batches for cpu, _ in results),
        "calls": calls,
        "median_wait_s": statistics.median(w for _, waits in results for w in waits),
        "longest_wait_s": max(w for _, waits in results for w in waits),
    }
    return row


def replication_lag(data_dir: Path, log_dir: Path, writes: int) -> dict[str, list[float]]:
    """Seconds from each write's acknowledgement by the primary until its replica serves it."""
    primary = ServerProcess(data_dir, log=log_dir / "lag-primary.log")
    replica = ServerProcess(data_dir, "--replica", log=log_dir / "lag-replica.log")
    pfs, _ = connect(primary.address)
    rfs, _ = connect(replica.address)
    lags: dict[str, list[float]] = {"Put of one row": [], "graph write of one edge": []}
    for i in range(writes):
        row, at = torch.full((1, pfs.get_tensor_size(group_name=None, attr_name="x")[1]), float(i)), torch.tensor([i])
        pfs.put_tensor(row, group_name=None, attr_name="x", index=at)
        acked = time.monotonic()
        while not torch.equal(rfs.get_tensor(group_name=None, attr_name="x", index=at), row):
            time.sleep(0.002)
        lags["Put of one row"].append(time.monotonic() - acked)
        version = GraphWriter(pfs).write(add_edges={None: (at, at + 1)}).version
        acked = time.monotonic()
        while server_info(rfs.connection).graph_version < version:
            time.sleep(0.002)
        lags["graph write of one edge"].append(time.monotonic() - acked)
    for fs in (pfs, rfs):
        fs.connection.close()
    replica.stop()
    primary.stop()
    return lags


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=50_000)
    parser.add_argument("--batches", type=int, default=40, help="batches each trainer makes in a row")
    parser.add_argument("--servers", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--trainers", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--rate", type=float, default=10.0,
                        help="a trainer's batches/s for the capacity model (a GPU step's pace)")
    parser.add_argument("--writes", type=int, default=20, help="writes of each kind timed for the lag")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="gnnstore-replicas-") as tmp:
        data_dir = Path(tmp) / "data"
        with open_stores(data_dir) as stores:
            ingest_graph(generate_graph(args.nodes, 10.0, 64, 8, seed=1), stores)
        for n_trainers in args.trainers:
            for n_servers in args.servers:
                rows.append(run_row(data_dir, Path(tmp), n_servers, n_trainers, args.nodes, args.batches))
                print(rows[-1], flush=True)
        kill = run_row(data_dir, Path(tmp), 2, 2, args.nodes, args.batches, kill=True)
        print(kill, flush=True)
        lags = replication_lag(data_dir, Path(tmp), args.writes)
    lines = ["| servers | trainers | batches/s | server CPU ms a batch | trainer CPU ms a batch | "
             "sampling calls per server | median wait s | longest wait s |",
             "| ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: |"]
    for r in rows:
        lines.append(f"| {r['servers']} | {r['trainers']} | {r['batches_per_s']:.1f} | {r['server_cpu_ms']:.1f} | "
                     f"{r['trainer_cpu_ms']:.1f} | {r['calls']} | {r['median_wait_s']:.3f} | "
                     f"{r['longest_wait_s']:.3f} |")
    per_batch = statistics.median(r["server_cpu_ms"] for r in rows) / 1e3
    model = (
        f"**Capacity model.** A batch costs the servers {1e3 * per_batch:.1f} ms of CPU (median over the rows), "
        f"so one server core serves {1 / per_batch:.0f} batches/s: it feeds {1 / (per_batch * args.rate):.1f} "
        f"trainers that each take {args.rate:g} batches/s. A fleet of T such trainers needs "
        f"T x {args.rate:g} x {per_batch:.4f} server cores, spread over as many replicas as that fills."
    )
    failover = (
        "**Failover.** A primary and a replica, 2 trainers, the replica SIGKILLed once a third of the batches "
        f"were made: longest wait for a batch {kill['longest_wait_s']:.3f} s (median {kill['median_wait_s']:.3f} s); "
        f"calls answered by the primary {kill['calls'][0]}."
    )
    lag = ("**Replication lag** (the replica's `--max-lag-s` 2 s bound; it catches up every 0.5 s, and each "
           "write is sent just after a catch-up showed the last one, so this is near the longest wait): ") + "; ".join(
        f"{what}: median {statistics.median(values):.3f} s, longest {max(values):.3f} s over {len(values)}"
        for what, values in lags.items()) + "."
    command = "python -m benchmarks.replicas " + " ".join(
        f"--{k} {' '.join(map(str, v)) if isinstance(v, list) else v}" for k, v in vars(args).items())
    path = write_page("replicas", "Many servers, many trainers", command, (
        f"{args.nodes:,} nodes, average degree 10, 64 float32 features; each trainer: batch {BATCH}, "
        f"fanouts {FANOUTS}, no cache, {args.batches} batches timed after two a server; a primary and "
        "`--replica` servers over one data directory, every trainer connected to all of them (round "
        "robin). The servers and trainers share this machine's cores, so batches/s measures the machine, "
        "not the servers; the CPU a batch is the steady figure.\n\n" + "\n".join(lines)
        + "\n\n" + "\n\n".join((model, failover, lag))
    ))
    print(path.read_text())


if __name__ == "__main__":
    main()
