"""Where a remote batch's CPU goes on the trainer, stage by stage, beside the engine in memory.

Issue 42 asks for the trainer's CPU a batch at a third of the in-memory engine's. This splits
both sides of that ratio into their stages, each as the CPU time of the thread that runs it
(``time.thread_time``), so the next change knows what it moves. A generated power-law graph
(default 100k nodes, 2.5M edges, 100 float32 features) is ingested and served by a real
``gnnstore serve`` child; the trainer is a PyG ``NodeLoader`` (1024 seeds a batch, fanouts
[15, 10]) with a cache of 20% of the feature bytes (``--policy``, default static) and prefetch
2, socket only (the data port; no shared memory), as across hosts. The engine is gnnstore's sampler in-process
over the same tensors.

Stages nest: ``sample`` holds ``gRPC call`` and ``data port receive``; ``assemble`` (PyG's
filter: the edge index stacked, then the feature store's ``multi_get``) holds ``rows placed``
(the cache's hits, and the delivered rows in the same pass when they are exactly its misses)
and ``rows placed apart`` (delivered rows placed in a second pass, and the dynamic tier's
admissions). Process CPU also counts what no stage names (torch's operator threads, the
loader's index batches, the prefetch threads' hand-offs).

The engine runs twice a round: as PyG users run it (torch's default threads; on a machine of
few cores its operators' second thread spins between calls, and that CPU counts) and with one
torch thread (the work alone). The ratio is given against both.

    nice python -m benchmarks.trainer_stages
"""
from __future__ import annotations

import argparse
import functools
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import psutil
import torch
import torch_geometric.loader.node_loader as node_loader
from torch_geometric.data import Data
from torch_geometric.loader import NodeLoader

from benchmarks.loader import cpu_seconds
from benchmarks.results_page import write_page
from gnnstore.backend.engine.sampler import SnapshotNeighborSampler
from gnnstore.backend.engine.topology import TopologySnapshot
from gnnstore.backend.server.server_process import ServerProcess
from gnnstore.client import Prefetcher, RemoteNeighborSampler, connect
from gnnstore.client.channel import Connection
from gnnstore.client.data_port import DataPortClient
from gnnstore.client.feature_cache import POLICY_NAMES, FeatureCache
from gnnstore.ingest.generator import generate_graph
from gnnstore.ingest.graph_ingest import ingest_graph
from gnnstore.stores.data_dir import open_stores

NODES = 100_000


class StageClock:
    """Thread CPU seconds spent in wrapped functions, by stage name."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self._lock = threading.Lock()

    def wrap(self, owner: object, name: str, stage: str) -> Callable[[], None]:
        """Time ``owner.name`` as ``stage``; returns what puts the original back."""
        original = getattr(owner, name)

        @functools.wraps(original)
        def timed(*args: object, **kwargs: object) -> object:
            began = time.thread_time()
            try:
                return original(*args, **kwargs)
            finally:
                with self._lock:
                    self.seconds[stage] += time.thread_time() - began

        setattr(owner, name, timed)
        return lambda: setattr(owner, name, original)


def measure(
    loader: object, clock: StageClock, args: argparse.Namespace, counters: Callable[[], tuple[int, ...]] = tuple
) -> tuple[float, dict[str, float], list[float]]:
    """Process CPU ms a batch, each stage's ms a batch, and how much ``counters`` grew a batch,
    after a warm-up."""
    batches = iter(loader)
    for _ in range(args.warmup):
        next(batches)
    clock.seconds.clear()
    trainer = psutil.Process()
    began, counted = cpu_seconds(trainer), counters()
    for _ in range(args.batches):
        next(batches)
    per_batch = 1000 / args.batches
    grown = [(after - before) / args.batches for after, before in zip(counters(), counted)]
    return (cpu_seconds(trainer) - began) * per_batch, {k: v * per_batch for k, v in clock.seconds.items()}, grown


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=NODES)
    parser.add_argument("--avg-degree", type=float, default=25.0)
    parser.add_argument("--dim", type=int, default=100)
    parser.add_argument("--batches", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--policy", default="static", choices=POLICY_NAMES, help="the trainer's cache policy")
    args = parser.parse_args()
    graph = generate_graph(args.nodes, args.avg_degree, args.dim, 10, seed=1, out_degree_exponent=2.1)
    seeds = torch.randperm(args.nodes, generator=torch.Generator().manual_seed(1))
    data = Data(x=graph.x, edge_index=graph.edge_index, y=graph.y)
    clock = StageClock()
    restore = [
        clock.wrap(SnapshotNeighborSampler, "sample_from_nodes", "engine: sample"),
        clock.wrap(RemoteNeighborSampler, "_sample", "sample"),
        clock.wrap(Connection, "call", "sample: gRPC call"),
        clock.wrap(DataPortClient, "fetch", "sample: data port receive"),
        clock.wrap(node_loader.NodeLoader, "filter_fn", "assemble"),
        clock.wrap(FeatureCache, "locate", "assemble: rows placed"),
        clock.wrap(FeatureCache, "fill", "assemble: rows placed apart"),
    ]
    engine = NodeLoader(data, node_sampler=SnapshotNeighborSampler(TopologySnapshot.from_data(data), [15, 10]),
                        input_nodes=seeds, batch_size=1024)
    figures: dict[str, list[float]] = defaultdict(list)
    traffic: dict[str, list[float]] = defaultdict(list)
    with tempfile.TemporaryDirectory(prefix="gnnstore-stages-") as folder:
        with open_stores(Path(folder) / "data") as stores:
            ingest_graph(graph, stores)
        with ServerProcess(Path(folder) / "data", log=Path(folder) / "server.log") as server:
            fs, _ = connect(server.address, shared_memory=False)
            cache_bytes = int(0.2 * sum(s.row_bytes * s.shape[0] for s in fs.schema()))
            fs.connection.close()
            fs, gs = connect(server.address, cache_bytes=cache_bytes, cache_policy=args.policy, shared_memory=False)
            remote = Prefetcher(NodeLoader((fs, gs), node_sampler=RemoteNeighborSampler(fs, [15, 10], feature_store=fs),
                                           input_nodes=seeds, batch_size=1024), depth=2)
            for _ in range(args.rounds):
                engine_total, engine_stages, _ = measure(engine, clock, args)
                threads = torch.get_num_threads()
                torch.set_num_threads(1)
                alone_total = measure(engine, clock, args)[0]
                torch.set_num_threads(threads)
                trainer_total, trainer_stages, (delivered, hits, misses) = measure(
                    remote, clock, args, lambda: (fs.exchange.delivered_bytes, fs.cache.hits, fs.cache.misses)
                )
                traffic["delivered"].append(delivered / 1e6)
                traffic["hit rate"].append(hits / (hits + misses))
                figures["engine in memory: process"].append(engine_total)
                figures["engine in memory, one torch thread: process"].append(alone_total)
                figures["engine in memory: engine's sampling"].append(engine_stages.get("engine: sample", 0.0))
                figures["engine in memory: assemble"].append(engine_stages.get("assemble", 0.0))
                figures["trainer: process"].append(trainer_total)
                for stage in ("sample", "sample: gRPC call", "sample: data port receive", "assemble",
                              "assemble: rows placed", "assemble: rows placed apart"):
                    figures[f"trainer: {stage}"].append(trainer_stages.get(stage, 0.0))
                print({k: round(v[-1], 2) for k, v in figures.items()}, flush=True)
            fs.connection.close()
    for undo in restore:
        undo()
    ratio = [t / e for t, e in zip(figures["trainer: process"], figures["engine in memory: process"])]
    alone = [t / e for t, e in zip(figures["trainer: process"], figures["engine in memory, one torch thread: process"])]
    table = ["| stage | CPU ms a batch, each round | median |", "|---|---|---|"]
    for name, values in figures.items():
        table.append(f"| {name} | {', '.join(f'{v:.2f}' for v in values)} | {sorted(values)[len(values) // 2]:.2f} |")
    body = (f"{args.nodes:,} nodes, ~{int(args.nodes * args.avg_degree):,} edges, {args.dim} float32 features; "
            f"1024 seeds a batch, fanouts [15, 10]; remote: {args.policy} cache of 20% of the feature bytes, "
            f"prefetch 2, socket only. {args.batches} batches a round after {args.warmup} warm-up; stages are the "
            "CPU time of the thread that ran them.\n\n" + "\n".join(table) + "\n\nTrainer process CPU ÷ engine "
            f"process CPU, each round: {', '.join(f'{r:.2f}×' for r in ratio)} (the issue's target: 0.35×); "
            f"against the engine on one torch thread: {', '.join(f'{r:.2f}×' for r in alone)}.\n\n"
            f"Rows delivered with the samples, MB a batch, each round: "
            f"{', '.join(f'{mb:.2f}' for mb in traffic['delivered'])}; the cache's hit rate: "
            f"{', '.join(f'{rate:.1%}' for rate in traffic['hit rate'])}.\n")
    default = args.policy == "static"
    page, options = "trainer_stages", ""
    if not default:
        page, options = f"{page}-{args.policy.replace('+', '-')}", f" --policy {args.policy}"
    if args.nodes != NODES:
        page, options = f"{page}-{args.nodes}", f"{options} --nodes {args.nodes}"
    print(write_page(page,
                     f"Where a remote batch's CPU goes on the trainer{'' if default else f' ({args.policy} cache)'}",
                     "python -m benchmarks.trainer_stages" + options, body))


if __name__ == "__main__":
    main()
