"""What a graph write costs until trainers can sample it, against building the snapshot anew.

A generated graph (default: the loader benchmark's 1M nodes, 25M edges) is ingested; its
topology snapshot is built from the graph store (the cost a write would have without versions).
Then a server takes ``--writes`` writes of ``--edges`` added edges each (and, in the second
round, as many removed): each ``WriteGraph`` call returns once its version is durable and built,
so the call's time is the time until the write is visible. The server log's build times and the
server's memory after the writes are printed too, and one batch is sampled from the newest
version to show it is served.

    nice python -m benchmarks.graph_writes --nodes 100000   # a quick look
    nice python -m benchmarks.graph_writes
"""
from __future__ import annotations

import argparse
import re
import statistics
import tempfile
import time
from pathlib import Path

import psutil
import torch
from torch_geometric.sampler import NodeSamplerInput

from benchmarks.loader import graph_arguments, prepare
from gnnstore.backend.engine.snapshot_builder import build_snapshot
from gnnstore.backend.server.server_process import ServerProcess
from gnnstore.client import GraphWriter, RemoteNeighborSampler, connect, server_info
from gnnstore.stores.data_dir import SNAPSHOTS, open_stores


def full_build_seconds(data_dir: Path) -> float:
    """Seconds to build the topology snapshot from the graph store, as the server does at start."""
    with open_stores(data_dir, read_only=True) as stores:
        started = time.perf_counter()
        build_snapshot(stores.graph_store, data_dir / SNAPSHOTS, rebuild=True)
        return time.perf_counter() - started


def write_rounds(address: str, nodes: int, writes: int, edges: int) -> dict[str, list[float]]:
    """Seconds per ``WriteGraph`` call: ``edges`` added, then ``edges`` added and as many removed."""
    fs, _ = connect(address)
    writer = GraphWriter(fs)
    g = torch.Generator().manual_seed(0)
    rounds: dict[str, list[float]] = {f"add {edges}": [], f"add {edges} + remove {edges}": []}
    added: list[int] = []
    for name, seconds in rounds.items():
        for _ in range(writes):
            src, dst = torch.randint(0, nodes, (2, edges), generator=g)
            remove = {} if "remove" not in name else {None: torch.tensor(added[:edges])}
            started = time.perf_counter()
            done = writer.write(add_edges={None: (src, dst)}, remove_edges=remove)
            seconds.append(time.perf_counter() - started)
            added = added[edges:] if remove else added
            added += done.edge_ids[None].tolist()
    return rounds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    graph_arguments(parser)
    parser.add_argument("--writes", type=int, default=5, help="writes per round")
    parser.add_argument("--edges", type=int, default=1000, help="edges added (and removed) per write")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gnnstore-writes-") as tmp:
        folder = Path(tmp) / "graph"
        folder.mkdir()
        _, data_dir, _ = prepare(args.nodes, args.avg_degree, args.dim, args.out_degree_exponent, folder)
        build = full_build_seconds(data_dir)
        print(f"full snapshot build from the graph store: {build:.2f} s", flush=True)
        log = Path(tmp) / "server.log"
        with ServerProcess(data_dir, log=log, startup_timeout=3600) as server:
            rss_before = psutil.Process(server.proc.pid).memory_info().rss
            rounds = write_rounds(server.address, args.nodes, args.writes, args.edges)
            rss_after = psutil.Process(server.proc.pid).memory_info().rss
            fs, _ = connect(server.address)
            version = server_info(fs.connection).graph_version
            out = RemoteNeighborSampler(fs, [15, 10]).sample_nodes(NodeSamplerInput(None, torch.arange(1024)), seed=1)
        for name, seconds in rounds.items():
            median = statistics.median(seconds)
            print(f"write of {name} edges, call until visible: median {median * 1e3:.0f} ms, max "
                  f"{max(seconds) * 1e3:.0f} ms over {len(seconds)} writes ({build / median:.0f}x faster than "
                  "the full build)")
        builds = [float(s) for s in re.findall(r"graph version \d+ built in ([0-9.]+) s", log.read_text())]
        if builds:
            print(f"server-side version builds: median {statistics.median(builds) * 1e3:.0f} ms over {len(builds)}")
        print(f"server RSS {rss_before / 2**20:.0f} MB before the writes, {rss_after / 2**20:.0f} MB after "
              f"(built versions kept in memory: at most 4)")
        print(f"sampled 1024 seeds from version {version}: {out.node.numel():,} nodes, {out.edge.numel():,} edges")


if __name__ == "__main__":
    main()
