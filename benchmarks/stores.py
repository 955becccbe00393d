"""Store throughput: RocksDB feature puts/gets, id-map calls and graph-database edge loads
(LadybugDB, the default engine), in rows/s.

Each figure is printed with the same operation on in-memory arrays (the baseline, measured in
the same run) and the ratio store/baseline.

    nice python -m benchmarks.stores                              # 1M rows x 100 float32, 1M edges
    nice python -m benchmarks.stores --rows 100000 --edges 100000 # smaller
"""
from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from gnnstore.stores import EmbeddedGraphStore, IdMap, RocksDBFeatureStore


def timed(fn: Callable[[], object]) -> tuple[float, object]:
    """Seconds one call of ``fn`` took, and its result."""
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def report(name: str, rows: int, seconds: float, baseline: float) -> None:
    print(f"{name:<36} {rows:>10,d} rows {seconds:8.2f} s {rows / seconds:>12,.0f} rows/s"
          f"   memory {rows / baseline:>14,.0f} rows/s   ratio {baseline / seconds:.4f}")


def bench_features(root: Path, rows: int, dim: int) -> None:
    x = torch.randn(rows, dim)
    ids = torch.randint(0, rows, (min(rows, 100_000),))
    with RocksDBFeatureStore(root / "features") as store:
        base, _ = timed(lambda: x.clone())
        sec, _ = timed(lambda: store.put_tensor(x, group_name="paper", attr_name="x", index=None))
        report(f"feature put [{rows}x{dim}] float32", rows, sec, base)
        upd = torch.randperm(rows)[: len(ids)]
        base, _ = timed(lambda: x.index_copy(0, upd, x[upd]))
        sec, _ = timed(lambda: store.put_tensor(x[upd], group_name="paper", attr_name="x", index=upd))
        report("feature put by index (random rows)", len(upd), sec, base)
        base, _ = timed(lambda: x.clone())
        sec, out = timed(lambda: store.get_tensor("paper", "x", None))
        assert torch.equal(out, x)
        report("feature get all (index None)", rows, sec, base)
        base, _ = timed(lambda: x[ids])
        sec, out = timed(lambda: store.get_tensor("paper", "x", ids))
        assert torch.equal(out, x[ids])
        report("feature get random ids", len(ids), sec, base)


def bench_id_map(root: Path, rows: int) -> None:
    keys = np.random.default_rng(0).permutation(rows * 10)[:rows].astype(np.int64)
    with IdMap(root / "idmap") as id_map:
        base, table = timed(lambda: {k: i for i, k in enumerate(keys.tolist())})
        sec, ids = timed(lambda: id_map.map_keys("user", keys))
        report("id map: map new int keys", rows, sec, base)
        base, _ = timed(lambda: [table[k] for k in keys.tolist()])
        sec, _ = timed(lambda: id_map.map_keys("user", keys))
        report("id map: map known int keys", rows, sec, base)
        sec, back = timed(lambda: id_map.to_ids("user", keys))
        assert np.array_equal(back, ids)
        report("id map: to_ids", rows, sec, base)
        sec, out = timed(lambda: id_map.to_keys("user", ids))
        assert out == keys.tolist()
        report("id map: to_keys", rows, sec, base)
        words = [f"user-{k}" for k in keys[: rows // 10].tolist()]
        base, _ = timed(lambda: {k: i for i, k in enumerate(words)})
        sec, _ = timed(lambda: id_map.map_keys("name", words))
        report("id map: map new str keys", len(words), sec, base)
        sec, _ = timed(lambda: id_map.identity("paper", rows))
        print(f"{'id map: identity(n)':<36} {rows:>10,d} rows {sec:8.4f} s")


def bench_edges(root: Path, edges: int, nodes: int) -> None:
    gen = torch.Generator().manual_seed(0)
    row = torch.randint(0, nodes, (edges,), generator=gen)
    col = torch.randint(0, nodes, (edges,), generator=gen)
    et = ("paper", "cites", "paper")
    with EmbeddedGraphStore(root / "graph.lbug") as store:
        base, _ = timed(lambda: (row.clone(), col.clone()))
        sec, _ = timed(lambda: store.put_edges((row, col), et, "coo", (nodes, nodes)))
        report("graph db put coo (first load)", edges, sec, base)
        sec, _ = timed(lambda: store.put_edges((row, col), et, "coo", (nodes, nodes)))
        report("graph db put coo (replace)", edges, sec, base)
        sec, out = timed(lambda: store.edge_index(et, "coo"))
        assert np.array_equal(out[0], row.numpy()) and np.array_equal(out[1], col.numpy())
        report("graph db edge_index coo", edges, sec, base)
        sec, chunks = timed(lambda: list(store.iter_edge_index(et, 1 << 18)))
        report("graph db iter_edge_index (256k chunks)", edges, sec, base)
        store.page_edges = max(1, edges // 4)
        sec, chunks = timed(lambda: list(store.iter_edge_index(et, 1 << 18)))
        report("graph db iter_edge_index (4 pages)", edges, sec, base)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="feature rows and id-map keys")
    parser.add_argument("--dim", type=int, default=100, help="float32 values per feature row")
    parser.add_argument("--edges", type=int, default=1_000_000, help="edges loaded into the graph database")
    parser.add_argument("--nodes", type=int, default=100_000, help="nodes the edges connect")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gnnstore-bench-") as tmp:
        root = Path(tmp)
        bench_features(root, args.rows, args.dim)
        bench_id_map(root, args.rows)
        bench_edges(root, args.edges, args.nodes)


if __name__ == "__main__":
    main()
