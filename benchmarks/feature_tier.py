"""Feature reads: the server's memory-mapped tier vs RocksDB vs memory, and client cache policies.

One run, one generated power-law graph (``gnnstore.ingest.generator``):

1. server side, on the same random ids: rows/s of a RocksDB multi-get, of the feature tier's
   gather (memory-mapped, page cache warm) and of an in-memory numpy gather (the baseline);
2. client side, on the ``n_id`` stream of real mini-batches (1024 seeds, fanouts [15, 10]
   sampled by the engine): hit rate and per-batch cost of every cache policy at 5% and 20%
   of the feature bytes; the static tier is warmed with the nodes of highest out-degree
   (the ones neighbour sampling reaches most).

    nice python -m benchmarks.feature_tier                 # 1M nodes x 100 float32, 25M edges
    nice python -m benchmarks.feature_tier --nodes 100000  # smaller
"""
from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from gnnstore.backend.engine.sampling_engine import SamplingEngine
from gnnstore.backend.engine.topology import TopologySnapshot
from gnnstore.backend.features.feature_tier import FeatureTier
from gnnstore.client.feature_cache import FeatureCache
from gnnstore.common.attr_schema import AttrSchema
from gnnstore.ingest.generator import generate_graph
from gnnstore.stores.rocksdb_feature_store import RocksDBFeatureStore

POLICIES = ("lru", "sieve", "static", "static+sieve")


def best_of(fn: Callable[[], object], repeats: int) -> float:
    """Fastest of ``repeats`` runs, in seconds."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def server_side(x: torch.Tensor, work: Path, num_ids: int, repeats: int) -> None:
    """RocksDB multi-get vs the tier vs in memory, on the same random distinct ids."""
    n = x.shape[0]
    ids = torch.from_numpy(np.random.default_rng(1).choice(n, min(num_ids, n), replace=False))
    x_np = x.numpy()
    with RocksDBFeatureStore(work / "features") as store:
        start = time.perf_counter()
        store.put_tensor(x, group_name=None, attr_name="x", index=None)
        put_s = time.perf_counter() - start
        tier = FeatureTier(work / "tier")
        start = time.perf_counter()
        tier.refresh(store.rows)
        export_s = time.perf_counter() - start
        rows_db = store.get_tensor(group_name=None, attr_name="x", index=ids)
        rows_tier = tier.gather(None, "x", ids.numpy())
        assert torch.equal(rows_db, x[ids]) and np.array_equal(rows_tier, x[ids].numpy())
        figures = {
            "in-memory numpy gather": best_of(lambda: x_np[ids.numpy()], repeats),
            "in-memory torch index_select": best_of(lambda: x.index_select(0, ids), repeats),
            "feature tier gather (mmap, warm)": best_of(lambda: tier.gather(None, "x", ids.numpy()), repeats),
            "RocksDB multi-get": best_of(
                lambda: store.get_tensor(group_name=None, attr_name="x", index=ids), repeats
            ),
        }
    base = figures["in-memory numpy gather"]
    print(f"\n## server-side gather: {len(ids)} random ids of {n} x {tuple(x.shape[1:])} {x.dtype}")
    print(f"RocksDB put (SST ingest): {n / put_s:,.0f} rows/s; tier export: {n / export_s:,.0f} rows/s")
    print("| source | ms | rows/s | MB/s | time / in-memory |\n|---|---|---|---|---|")
    row_mb = x[0].numel() * x.element_size() / 1e6
    for name, secs in figures.items():
        print(
            f"| {name} | {secs * 1e3:.1f} | {len(ids) / secs:,.0f} | "
            f"{len(ids) * row_mb / secs:,.0f} | {secs / base:.2f}x |"
        )


def batch_stream(data: object, num_batches: int, batch_size: int, fanouts: list[int]) -> list[torch.Tensor]:
    """``n_id`` of ``num_batches`` mini-batches of random training seeds."""
    engine = SamplingEngine(TopologySnapshot.from_data(data))
    seeds = torch.randperm(data.num_nodes, generator=torch.Generator().manual_seed(2))
    return [
        torch.from_numpy(engine.sample(seeds[i * batch_size : (i + 1) * batch_size], fanouts, random_seed=i).node[None])
        for i in range(num_batches)
    ]


def client_side(x: torch.Tensor, hot: torch.Tensor, batches: list[torch.Tensor], warmup: int) -> None:
    """Hit rate and cost per batch of every policy at 5% and 20% of the feature bytes."""
    spec = AttrSchema(None, "x", x.dtype, tuple(x.shape))
    total = x.numel() * x.element_size()
    mean_ids = np.mean([len(b) for b in batches])
    print(
        f"\n## client cache: {len(batches) - warmup} measured batches after {warmup} warm-up, "
        f"{mean_ids:,.0f} ids per batch on average"
    )
    print("| policy | size | hit rate | static hits | cache ms/batch (fetch excluded) | ids/s |")
    print("|---|---|---|---|---|---|")
    for share in (0.05, 0.20):
        for policy in POLICIES:
            cache = FeatureCache(int(share * total), [spec], policy=policy)
            if policy.startswith("static"):
                cache.warm(None, "x", hot, x[hot])
            fetch_s = [0.0]

            def fetch(ids: torch.Tensor) -> torch.Tensor:
                start = time.perf_counter()
                rows = x.index_select(0, ids)
                fetch_s[0] += time.perf_counter() - start
                return rows

            for n_id in batches[:warmup]:
                cache.read(None, "x", n_id, fetch)
            cache.start_epoch()
            fetch_s[0] = 0.0
            start = time.perf_counter()
            for n_id in batches[warmup:]:
                cache.read(None, "x", n_id, fetch)
            own = (time.perf_counter() - start - fetch_s[0]) / (len(batches) - warmup)
            stats = cache.stats()
            print(
                f"| {policy} | {share:.0%} | {stats.hit_rate:.1%} | "
                f"{stats.static_hits / max(1, stats.hits + stats.misses):.1%} | {own * 1e3:.1f} | "
                f"{mean_ids / own:,.0f} |"
            )
    base = best_of(lambda: x.index_select(0, batches[-1]), 3)
    print(f"baseline: in-memory index_select of one batch's rows: {base * 1e3:.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1_000_000)
    parser.add_argument("--avg-degree", type=float, default=25.0)
    parser.add_argument("--dim", type=int, default=100)
    parser.add_argument("--ids", type=int, default=90_000, help="ids per server-side gather")
    parser.add_argument("--batches", type=int, default=60, help="mini-batches for the cache figures")
    parser.add_argument("--warmup", type=int, default=20, help="of those, batches before measuring")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--work-dir", type=Path, default=None, help="default: a temporary folder")
    args = parser.parse_args()
    torch.set_num_threads(1)
    start = time.perf_counter()
    data = generate_graph(args.nodes, args.avg_degree, args.dim, 10, seed=0)
    print(f"graph: {args.nodes:,} nodes, {data.num_edges:,} edges, generated in {time.perf_counter() - start:.1f} s")
    x = data.x.contiguous()
    with tempfile.TemporaryDirectory(dir=args.work_dir) as work:
        server_side(x, Path(work), args.ids, args.repeats)
    out_degree = torch.bincount(data.edge_index[0], minlength=args.nodes)
    hot = torch.argsort(out_degree, descending=True)
    batches = batch_stream(data, args.batches, 1024, [15, 10])
    client_side(x, hot, batches, args.warmup)


if __name__ == "__main__":
    main()
