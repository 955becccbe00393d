"""Neo4j figures: ingest (online and bulk), export and attach edges/s, snapshot build, live vs snapshot sampling.

Starts the embedded Neo4j 5.26 the test suite uses (``tests/neo4j_server.py``) on a free port
with a temporary data folder, unless ``--uri`` names a running, empty one. Run it under ``nice``
on a shared machine:

    nice -n 10 python benchmarks/neo4j_backend.py            # 100k nodes, 1M edges
    nice -n 10 python benchmarks/neo4j_backend.py --small    # 20k nodes, 100k edges
    nice -n 10 python benchmarks/neo4j_backend.py --bulk 25000000   # bulk import and export, beside LadybugDB
"""
from __future__ import annotations

import argparse
import logging
import multiprocessing
import os
import resource
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from torch_geometric.sampler import NodeSamplerInput

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the suite's launcher

from neo4j_server import LocalNeo4j  # noqa: E402

from gnnstore.backend.engine.sampler import Neo4jLiveSampler, SnapshotNeighborSampler  # noqa: E402
from gnnstore.backend.engine.snapshot_builder import build_snapshot  # noqa: E402
from gnnstore.ingest.graph_ingest import ingest_graph  # noqa: E402
from gnnstore.ingest.neo4j_attach import read_neo4j_graph, read_spec  # noqa: E402
from gnnstore.stores import neo4j_graph_store  # noqa: E402
from gnnstore.stores.data_dir import open_stores  # noqa: E402
from gnnstore.stores.embedded_graph_store import EmbeddedGraphStore  # noqa: E402
from gnnstore.stores.neo4j_graph_store import Neo4jGraphStore  # noqa: E402
from gnnstore.stores.neo4j_import import admin_import_args, write_import_files  # noqa: E402
from gnnstore.stores.neo4j_schema import HOMO_LABEL, HOMO_REL  # noqa: E402


def power_law_edges(num_nodes: int, num_edges: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Sources uniform, destinations skewed towards low ids (a few hubs, a long tail)."""
    gen = torch.Generator().manual_seed(seed)
    row = torch.randint(num_nodes, (num_edges,), generator=gen)
    col = (torch.rand(num_edges, generator=gen) ** 2 * num_nodes).long()
    return row, col


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system) a running process has used (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu_s() -> float:
    """CPU seconds this process's finished children have used."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def cpu_bound(what: str, cpu: float, num_edges: int) -> str:
    """``what``'s CPU a million edges, and the edges/s it allows on this machine's cores."""
    cores = os.cpu_count() or 1
    return (f"{what} CPU {cpu:.1f} s, {cpu / num_edges * 1e6:.1f} s a million edges: at most "
            f"{num_edges / cpu * cores:,.0f} edges/s on {cores} cores")


def time_batches(sample: Callable, seeds: torch.Tensor, batch_size: int, max_batches: int) -> tuple[float, int]:
    """Batches per second over up to ``max_batches`` batches of ``batch_size`` seeds."""
    batches = seeds[: batch_size * max_batches].split(batch_size)
    started = time.perf_counter()
    edges = 0
    for batch in batches:
        out = sample(NodeSamplerInput(input_id=torch.arange(len(batch)), node=batch))
        edges += out.row.numel()
    return len(batches) / (time.perf_counter() - started), edges // len(batches)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", action="store_true", help="20k nodes, 100k edges")
    parser.add_argument("--uri", help="a running, empty Neo4j (auth off); default: start one")
    parser.add_argument("--batch-rows", type=int, default=20_000, help="rows per UNWIND batch")
    parser.add_argument("--batch-size", type=int, default=512, help="seeds per sampled batch")
    parser.add_argument("--fanouts", type=int, nargs="+", default=[10, 5])
    parser.add_argument("--bulk", type=int, metavar="EDGES",
                        help="only the bulk paths (import, then export and attach of the imported graph) on a "
                        "graph of EDGES edges and EDGES/25 nodes, beside LadybugDB's ingest and export of the same graph")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    num_nodes, num_edges = (20_000, 100_000) if args.small else (100_000, 1_000_000)

    if args.bulk:
        with tempfile.TemporaryDirectory(prefix="gnnstore-bench-neo4j-") as tmp:
            bulk_import(Path(tmp), args.bulk // 25, args.bulk, export=True)
            embedded_beside(Path(tmp), args.bulk // 25, args.bulk)
        return
    with tempfile.TemporaryDirectory(prefix="gnnstore-bench-neo4j-") as tmp:
        server = None
        uri = args.uri
        if uri is None:
            server = LocalNeo4j(Path(tmp) / "neo4j", heap_mb=1536, pagecache_mb=512).start()
            uri = server.uri
            print(f"neo4j start-up: {server.startup_s:.1f} s (embedded 5.26, {uri})")
        try:
            run(uri, Path(tmp), num_nodes, num_edges, args, None if server is None else server.proc.pid)
        finally:
            if server is not None:
                server.stop()


def bulk_import(tmp: Path, num_nodes: int, num_edges: int, export: bool = False) -> float:
    """A new database through ``neo4j-admin database import``: gnnstore writes the files,
    Neo4j imports them, gnnstore adopts the graph; with ``export``, the imported edges are then
    read back (``export_rates``) and attached (``attach``, into edge files and into the graph database).
    Prints each step; returns the import's edges/s overall."""
    row, col = power_law_edges(num_nodes, num_edges, seed=1)
    started = time.perf_counter()
    write_import_files({None: (row, col)}, {None: num_nodes}, tmp / "import")
    files_s = time.perf_counter() - started
    # an export reads the whole store: with a small page cache it would measure the disk
    neo4j = LocalNeo4j(tmp / "imported", heap_mb=1536, pagecache_mb=3072 if export else 512)
    admin_cpu = children_cpu_s()
    neo4j.admin(admin_import_args(tmp / "import"))
    import_s = time.perf_counter() - started - files_s
    admin_cpu = children_cpu_s() - admin_cpu
    neo4j.start()
    try:
        adopt_started = time.perf_counter()
        store = Neo4jGraphStore(neo4j.uri, None)
        store.adopt_import(tmp / "import")
        adopt_s = time.perf_counter() - adopt_started
        total_s = files_s + import_s + adopt_s  # the database's start-up is not counted
        print(f"bulk import: {num_edges} edges, {num_nodes} nodes: files {files_s:.1f} s, neo4j-admin import "
              f"{import_s:.1f} s, adopt (constraints, indexes, metadata) {adopt_s:.1f} s = "
              f"{num_edges / total_s:,.0f} edges/s", flush=True)
        print(f"  {cpu_bound('neo4j-admin import', admin_cpu, num_edges)}")
        if export:
            export_rates(store, (row, col))
            attach(neo4j.uri, tmp, num_edges)
            attach(neo4j.uri, tmp, num_edges, edge_files=False)
            attach(neo4j.uri, tmp, num_edges, edge_feature=True)
        store.close()
    finally:
        neo4j.stop()
    shutil.rmtree(tmp / "import")
    shutil.rmtree(tmp / "imported")
    return num_edges / total_s


def export_rates(store: Neo4jGraphStore, expected: tuple[torch.Tensor, torch.Tensor] | None = None) -> None:
    """Edges/s of the homogeneous edge type read back one page at a time (the baseline), then
    ``READ_SESSIONS`` pages at once, each read twice; checked against ``expected``."""
    rates: dict[int, list[float]] = {}
    default = neo4j_graph_store.READ_SESSIONS
    for sessions in (1, default, 1, default):
        neo4j_graph_store.READ_SESSIONS = sessions
        try:
            started = time.perf_counter()
            chunks = list(store.iter_edge_index(None))
            rate = sum(row.size for row, _, _ in chunks) / (time.perf_counter() - started)
        finally:
            neo4j_graph_store.READ_SESSIONS = default
        if expected is not None:
            assert np.array_equal(np.concatenate([c[0] for c in chunks]), expected[0].numpy()), "exported sources differ"
            assert np.array_equal(np.concatenate([c[1] for c in chunks]), expected[1].numpy()), "exported destinations differ"
        rates.setdefault(sessions, []).append(rate)
        print(f"edge export from Neo4j, {sessions} session(s): {rate:,.0f} edges/s", flush=True)
    print(f"ratio {default} sessions / 1: {max(rates[default]) / max(rates[1]):.2f}x (best of each)")


def embedded_beside(tmp: Path, num_nodes: int, num_edges: int) -> None:
    """The same graph into and out of the embedded default (LadybugDB): edges/s of each."""
    row, col = power_law_edges(num_nodes, num_edges, seed=1)
    with EmbeddedGraphStore(tmp / "graph.lbug") as store:
        started = time.perf_counter()
        store.put_edges((row, col), None, "coo", (num_nodes, num_nodes))
        put_s = time.perf_counter() - started
        started = time.perf_counter()
        read = sum(r.size for r, _, _ in store.iter_edge_index(None))
        read_s = time.perf_counter() - started
    print(f"LadybugDB, the same graph: ingest {num_edges / put_s:,.0f} edges/s, export {read / read_s:,.0f} edges/s")


def attach(uri: str, tmp: Path, num_edges: int, edge_feature: bool = False, edge_files: bool = True) -> None:
    """`gnnstore attach neo4j` over the graph in Neo4j, read as a user's schema (its label, its
    ``id`` property as the key and as the one feature, its relationship type; with
    ``edge_feature``, the relationships' ``eid`` property as an edge feature too), in a fresh
    process whose peak anonymous memory (heap, not mapped files) is reported beside its level
    before reading. The topology
    goes to edge files, as an attach writes it, or with ``edge_files=False`` into the graph
    database, as an attach wrote it before."""
    spec_file = tmp / "attach.toml"
    spec_file.write_text(
        f'[labels.{HOMO_LABEL}]\nkey = "id"\nfeatures = {{ x = "id" }}\n'
        f'[[relationships]]\nfrom = "{HOMO_LABEL}"\ntype = "{HOMO_REL}"\nto = "{HOMO_LABEL}"\n'
        + ('features = { edge_attr = "eid" }\n' if edge_feature else "")
    )
    shutil.rmtree(tmp / "attached", ignore_errors=True)
    spawn = multiprocessing.get_context("spawn")
    with spawn.Pool(1) as pool:
        read_s, total_s, start_mb, peak_mb = pool.apply(
            _attach_in_child, (uri, spec_file, tmp / "attached", edge_files)
        )
    shutil.rmtree(tmp / "attached", ignore_errors=True)
    what = "with one relationship property as an edge feature" if edge_feature else "topology and node features"
    into = "edge files" if edge_files else "the graph database (as before)"
    print(f"attach, {what} (read in one transaction, then ingest into {into} + RocksDB): read "
          f"{num_edges / read_s:,.0f} edges/s ({read_s:.1f} s), {num_edges / total_s:,.0f} edges/s in all "
          f"({total_s:.1f} s); peak anonymous memory {peak_mb:,.0f} MB, {peak_mb - start_mb:,.0f} MB above the "
          f"{start_mb:,.0f} MB before reading", flush=True)


def _attach_in_child(uri: str, spec_file: Path, data_dir: Path, edge_files: bool) -> tuple[float, float, float, float]:
    """Read and ingest in this (fresh) process: seconds to read, in all, anonymous memory before
    reading and at its peak, in MB. (Not ``ru_maxrss``: Linux carries it over from the parent.)"""
    anon = _AnonPeak()
    start_mb = anon.mb()
    started = time.perf_counter()
    data, keys, _ = read_neo4j_graph(uri, None, read_spec(spec_file))
    read_s = time.perf_counter() - started
    with open_stores(data_dir, edge_files=edge_files) as stores:
        ingest_graph(data, stores, keys=keys)
    return read_s, time.perf_counter() - started, start_mb, anon.mb()


class _AnonPeak:
    """The peak of this process's anonymous resident memory (``RssAnon``: heap, not mapped
    files), polled every 10 ms by a daemon thread."""

    def __init__(self) -> None:
        self._kib = self._now()
        threading.Thread(target=self._poll, daemon=True).start()

    @staticmethod
    def _now() -> int:
        return int(Path("/proc/self/status").read_text().split("RssAnon:")[1].split()[0])

    def mb(self) -> float:
        return self._kib / 1024

    def _poll(self) -> None:
        while True:
            self._kib = max(self._kib, self._now())
            time.sleep(0.01)


def run(
    uri: str, tmp: Path, num_nodes: int, num_edges: int, args: argparse.Namespace, neo4j_pid: int | None
) -> None:
    row, col = power_law_edges(num_nodes, num_edges)
    store = Neo4jGraphStore(uri, None, batch_size=args.batch_rows)
    neo4j_cpu = 0.0 if neo4j_pid is None else cpu_s(neo4j_pid)
    started = time.perf_counter()
    store.put_edges((row, col), None, "coo", (num_nodes, num_nodes))
    ingest_s = time.perf_counter() - started
    print(f"ingest: {num_edges} edges, {num_nodes} nodes in {ingest_s:.1f} s = "
          f"{num_edges / ingest_s:,.0f} edges/s (UNWIND batches of {args.batch_rows})")
    if neo4j_pid is not None:  # the nodes' creation is included
        print(f"  {cpu_bound('Neo4j', cpu_s(neo4j_pid) - neo4j_cpu, num_edges)}")
    imported = bulk_import(tmp, num_nodes, num_edges)
    print(f"ratio bulk import / online ingest: {imported / (num_edges / ingest_s):.1f}x")

    export_rates(store, (row, col))

    started = time.perf_counter()
    snapshot = build_snapshot(store, tmp / "snapshots")
    print(f"snapshot build from Neo4j: {time.perf_counter() - started:.1f} s")
    attach(uri, tmp, num_edges)
    attach(uri, tmp, num_edges, edge_files=False)
    attach(uri, tmp, num_edges, edge_feature=True)

    seeds = torch.randperm(num_nodes, generator=torch.Generator().manual_seed(1))
    live = Neo4jLiveSampler(store, args.fanouts)
    snap = SnapshotNeighborSampler(snapshot, args.fanouts, seed=0)
    time_batches(live.sample_from_nodes, seeds, args.batch_size, 1)  # warm the query plan
    live_rate, live_edges = time_batches(live.sample_from_nodes, seeds, args.batch_size, 10)
    snap_rate, snap_edges = time_batches(snap.sample_from_nodes, seeds, args.batch_size, 200)
    print(f"live sampling:     {live_rate:8.2f} batches/s ({args.batch_size} seeds, fanouts "
          f"{args.fanouts}, ~{live_edges} edges/batch)")
    print(f"snapshot sampling: {snap_rate:8.2f} batches/s (~{snap_edges} edges/batch)")
    print(f"ratio snapshot/live: {snap_rate / live_rate:.1f}x")
    store.close()


if __name__ == "__main__":
    main()
