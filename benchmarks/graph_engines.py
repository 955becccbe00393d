"""The embedded graph stores side by side: Kùzu, LadybugDB and edge files on one graph.

Each store runs in a fresh process (the two engines cannot share one) on the same uniformly
random edge list (seeded): the ingest (one COO put), the snapshot a server builds at start-up
(``build_snapshot``: two streaming scans and the CSC), a full scan (``iter_edge_index``), the
store's size on disk, and the process's peak memory above its level once the edges were made.
Each step's wall time is beside its CPU time (every thread of the process): on a shared machine
the CPU seconds are the steady figure. The table goes to stdout and to ``benchmarks/results/graph_engines.md`` (commit, date, machine).

    nice python -m benchmarks.graph_engines                       # 1M nodes, 25M edges
    nice python -m benchmarks.graph_engines --nodes 100000 --edges 1000000
"""
from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import resource
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psutil

from benchmarks.results_page import write_page

KINDS = ("kuzu", "ladybug", "edge-files")


def measure(kind: str, root: Path, nodes: int, edges: int) -> dict[str, float]:
    """Ingest, snapshot build, scan, disk size and memory of one store (in a fresh process)."""
    import torch

    from gnnstore.backend.engine.snapshot_builder import build_snapshot
    from gnnstore.stores.edge_file_graph_store import EdgeFileGraphStore
    from gnnstore.stores.embedded_graph_store import EmbeddedGraphStore
    from gnnstore.stores.graph_engines import ENGINES

    def open_store(read_only: bool):
        if kind == "edge-files":
            return EdgeFileGraphStore(root / "graph.edges", read_only=read_only)
        return EmbeddedGraphStore(root / ENGINES[kind].file_name, engine=kind, read_only=read_only)

    gen = torch.Generator().manual_seed(0)
    row, col = torch.randint(0, nodes, (edges,), generator=gen), torch.randint(0, nodes, (edges,), generator=gen)
    base = psutil.Process().memory_info().rss
    figures = {}
    with timed(figures, "ingest"), open_store(read_only=False) as store:
        store.put_edges((row, col), ("paper", "cites", "paper"), "coo", (nodes, nodes))
    del row, col
    figures["disk"] = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    with open_store(read_only=True) as store:
        with timed(figures, "snapshot"):
            build_snapshot(store, root / "snapshots")
        with timed(figures, "scan"):
            scanned = sum(r.size for r, _, _ in store.iter_edge_index(("paper", "cites", "paper")))
    assert scanned == edges
    figures["peak"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - base
    return figures


@contextlib.contextmanager
def timed(figures: dict[str, float], step: str) -> Iterator[None]:
    """Note the wall and CPU seconds of the block as ``<step>_s`` and ``<step>_cpu``."""
    wall, cpu = time.perf_counter(), time.process_time()
    yield
    figures[f"{step}_s"], figures[f"{step}_cpu"] = time.perf_counter() - wall, time.process_time() - cpu


def table(results: dict[str, dict[str, float]], edges: int) -> str:
    """The figures as a Markdown table."""
    lines = [
        "One run; each store in a fresh process.",
        "",
        ("| store | ingest: edges/s (wall s, CPU s) | snapshot build: wall s (CPU s) "
         "| full scan: edges/s (wall s, CPU s) | disk (MB) | peak memory (MB) |"),
        "|---|---|---|---|---|---|",
    ]
    for kind, r in results.items():
        lines.append(
            f"| {kind} | {edges / r['ingest_s']:,.0f} ({r['ingest_s']:.1f}, {r['ingest_cpu']:.1f}) | "
            f"{r['snapshot_s']:.1f} ({r['snapshot_cpu']:.1f}) | "
            f"{edges / r['scan_s']:,.0f} ({r['scan_s']:.1f}, {r['scan_cpu']:.1f}) | "
            f"{r['disk'] / 1e6:,.0f} | {r['peak'] / 1e6:,.0f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1_000_000)
    parser.add_argument("--edges", type=int, default=25_000_000)
    parser.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS))
    args = parser.parse_args()
    spawn = multiprocessing.get_context("spawn")
    results = {}
    for kind in args.kinds:
        with tempfile.TemporaryDirectory(prefix=f"gnnstore-{kind}-") as tmp, spawn.Pool(1) as pool:
            results[kind] = pool.apply(measure, (kind, Path(tmp), args.nodes, args.edges))
        print(f"{kind}: {results[kind]}", flush=True)
    page = table(results, args.edges)
    command = f"python -m benchmarks.graph_engines --nodes {args.nodes} --edges {args.edges}"
    print(write_page("graph_engines", "Embedded graph stores side by side", command, page).read_text())


if __name__ == "__main__":
    main()
