"""Ingest benchmark: a generated power-law graph into LadybugDB + RocksDB, rows/s per step.

    python benchmarks/ingest.py --nodes 1000000 --avg-degree 25 --features 100

Prints the generator's time, then rows/s for the id map (nodes), the feature rows and the
edges, the total wall time, and the ratio to a baseline measured in the same run on the same
disk: writing the same arrays as raw ``.npy`` files (the floor any durable store must pay).
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from gnnstore.ingest.generator import generate_graph
from gnnstore.ingest.graph_ingest import ingest_graph
from gnnstore.stores.data_dir import open_stores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1_000_000)
    parser.add_argument("--avg-degree", type=float, default=25.0)
    parser.add_argument("--features", type=int, default=100)
    parser.add_argument("--classes", type=int, default=47)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keys", choices=("identity", "int", "str"), default="identity",
                        help="Node keys: 0..N-1 (the id map's identity fast path), other ints, "
                             "or strings (both map every key through RocksDB).")
    parser.add_argument("--dir", type=Path, default=None,
                        help="Parent folder for the temporary data dir (default: system temp).")
    args = parser.parse_args()

    start = time.perf_counter()
    data = generate_graph(args.nodes, args.avg_degree, args.features, args.classes, seed=args.seed)
    print(f"generate   {args.nodes:,} nodes, {data.num_edges:,} edges, {args.features} features: "
          f"{time.perf_counter() - start:.2f} s")

    with tempfile.TemporaryDirectory(prefix="gnnstore-bench-", dir=args.dir) as root:
        start = time.perf_counter()
        for name in ("x", "y", "train_mask", "val_mask", "test_mask", "edge_index"):
            np.save(Path(root) / f"{name}.npy", data[name].numpy())
        baseline = time.perf_counter() - start

        stores = open_stores(Path(root) / "data")
        try:
            report = ingest_graph(data, stores, keys=_keys(args.keys, args.nodes), progress=True)
        finally:
            start = time.perf_counter()
            stores.close()
            close = time.perf_counter() - start

    print(report.summary())
    for kind in ("nodes", "features", "edges"):
        rows, seconds = report.rows(kind), report.seconds_of(kind)
        print(f"{kind:<9} {rows:>13,} rows in {seconds:8.2f} s = {rows / max(seconds, 1e-9):>12,.0f} rows/s")
    total = report.seconds + close
    print(f"total     {total:.2f} s (close/flush {close:.2f} s)")
    print(f"baseline  raw .npy of the same arrays: {baseline:.2f} s; ingest / baseline = "
          f"{total / baseline:.1f}x")


def _keys(kind: str, num_nodes: int) -> dict | None:
    """External keys for ``--keys``: ``None`` (0..N-1), ints offset by 10^12, or ``"n<i>"``."""
    if kind == "identity":
        return None
    ints = np.arange(num_nodes, dtype=np.int64) + 10**12
    return {None: ints if kind == "int" else np.char.add("n", ints.astype(str)).astype(object)}


if __name__ == "__main__":
    main()
