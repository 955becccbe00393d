"""Edge rows per batch with and without a trainer-side edge cache, in one run.

A generated power-law graph (default 100k nodes, 2.5M edges, 100 float32 node features) gets a
16-float edge attribute per edge, is ingested into LadybugDB + RocksDB and served by a real
``gnnstore serve`` child process. A ``NodeLoader`` (1024 seeds a batch, fanouts [15, 10], a 20%
static+SIEVE node cache, prefetch 2) adds the edge rows with ``EdgeFeatures``: without an edge
cache, then with SIEVE edge caches of 20% and 50% of the edge rows' bytes, each in a fresh
trainer process: over loopback with shared memory, then across a 1 Gbit/s link (a server in a
network namespace whose loopback ``tc ... tbf`` caps; ``benchmarks.link``, root only), socket
only. Per configuration:
batches/s (and its ratio to the run without an edge cache), edge rows that travelled per batch
(with a cache: its misses; the server leaves the rest out), the edge cache's hit rate, and a
check that every batch's ``edge_attr`` is the stored rows of its ``e_id``.

    nice python -m benchmarks.edge_cache
"""
from __future__ import annotations

import argparse
import multiprocessing
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import torch
from torch_geometric.loader import NodeLoader

from benchmarks.link import capped_loopback
from benchmarks.loader import NUM_CLASSES
from gnnstore.backend.server.server_process import ServerProcess
from gnnstore.client import EdgeFeatures, Prefetcher, RemoteNeighborSampler, connect
from gnnstore.ingest.generator import generate_graph
from gnnstore.ingest.graph_ingest import ingest_graph
from gnnstore.stores.data_dir import open_stores

EDGE_DIM = 16


def run(address: str, shared_memory: bool, node_cache: int, edge_cache: int, args: argparse.Namespace) -> dict:
    """One loader configuration, in a fresh trainer process: batches/s, edge rows travelled per
    batch, edge cache hit rate."""
    fs, gs = connect(address, cache_bytes=node_cache, shared_memory=shared_memory)
    edges = EdgeFeatures(fs, cache_bytes=edge_cache)
    sampler = RemoteNeighborSampler(fs, args.fanouts, feature_store=fs)
    seeds = torch.randperm(args.nodes, generator=torch.Generator().manual_seed(1))
    loader = NodeLoader((fs, gs), node_sampler=sampler, input_nodes=seeds, batch_size=args.batch_size,
                        transform=edges)
    stored = edge_features(args.nodes * args.avg_degree)
    prefetcher = Prefetcher(loader, depth=2)
    batches = iter(prefetcher)
    for _ in range(args.warmup):
        next(batches)
    if edges.cache is not None:
        edges.cache.start_epoch()
    travelled = 0
    started = time.perf_counter()
    for _ in range(args.batches):
        batch = next(batches)
        if not torch.equal(batch.edge_attr, stored[batch.e_id]):
            raise AssertionError("a batch's edge_attr is not the stored rows of its e_id")
        if edges.cache is None:
            travelled += batch.e_id.unique().numel()
    seconds = time.perf_counter() - started
    prefetcher.close()
    stats = None if edges.cache is None else edges.cache.stats()
    return {
        "batches_per_s": args.batches / seconds,
        "edge_rows_per_batch": (travelled if stats is None else stats.misses) / args.batches,
        "hit_rate": None if stats is None else stats.hit_rate,
    }


def edge_features(num_edges: float) -> torch.Tensor:
    """The graph's edge attribute (the same in every process)."""
    return torch.randn(int(num_edges), EDGE_DIM, generator=torch.Generator().manual_seed(2))


def rows(data_dir: Path, link: str | None, node_cache: int, edge_bytes: int, args: argparse.Namespace) -> None:
    """Print a row per edge cache size, the server and each trainer in fresh processes."""
    where = "loopback, shared memory" if link is None else f"a {link}/s link, socket only"
    with ServerProcess(data_dir, log=data_dir.parent / "server.log", startup_timeout=3600) as server:
        base = None
        for share in (0.0, 0.2, 0.5):
            with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as trainer:
                r = trainer.submit(run, server.address, link is None, node_cache, int(share * edge_bytes), args).result()
            base = base or r["batches_per_s"]
            hit = "" if r["hit_rate"] is None else f", edge cache hits {r['hit_rate']:.1%}"
            print(f"{where}: edge cache {share:>4.0%} of edge rows: {r['batches_per_s']:6.2f} batches/s "
                  f"({r['batches_per_s'] / base:.2f}x), {r['edge_rows_per_batch']:9,.0f} edge rows "
                  f"({r['edge_rows_per_batch'] * EDGE_DIM * 4 / 2**20:5.1f} MB) travelled per batch{hit}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--avg-degree", type=float, default=25.0)
    parser.add_argument("--dim", type=int, default=100)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--fanouts", type=int, nargs="+", default=[15, 10])
    parser.add_argument("--warmup", type=int, default=10, help="batches before timing (fills caches)")
    parser.add_argument("--batches", type=int, default=40, help="batches timed per configuration")
    parser.add_argument("--link", default="1gbit", help="the capped link's rate (tc units)")
    args = parser.parse_args()
    graph = generate_graph(args.nodes, args.avg_degree, args.dim, NUM_CLASSES, seed=0, out_degree_exponent=2.1)
    graph.edge_attr = edge_features(graph.num_edges)
    edge_bytes = graph.edge_attr.numel() * 4
    node_cache = int(0.2 * graph.x.numel() * 4)
    with tempfile.TemporaryDirectory(prefix="gnnstore-edge-cache-") as tmp:
        data_dir = Path(tmp) / "data"
        with open_stores(data_dir) as stores:
            ingest_graph(graph, stores)
        del graph
        print(f"{args.nodes:,} nodes, {args.nodes * args.avg_degree:,.0f} edges with {EDGE_DIM} float32 edge "
              f"features ({edge_bytes / 2**20:.0f} MB); batches of {args.batch_size} seeds, fanouts {args.fanouts}, "
              "20% static+SIEVE node cache, prefetch 2", flush=True)
        rows(data_dir, None, node_cache, edge_bytes, args)
        with capped_loopback(args.link) as reason:
            if reason is None:
                rows(data_dir, args.link, node_cache, edge_bytes, args)
            else:
                print(f"the {args.link}/s link rows are skipped: {reason}")


if __name__ == "__main__":
    main()
