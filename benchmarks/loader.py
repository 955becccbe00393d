"""Mini-batch loading and training: in memory vs. a gnnstore server over loopback, in one run.

One generated power-law graph (``gnnstore.ingest.generator``; default 1M nodes, 25M edges, 100
float32 features), ingested into LadybugDB + RocksDB and served by a real ``gnnstore serve`` child
process. Every configuration runs in a fresh spawned trainer process (so its RSS is its own) on
the same seeds (1024 per batch, fanouts [15, 10]):

* in memory: gnnstore's engine in-process over the tensors (``SnapshotNeighborSampler`` in a
  PyG ``NodeLoader``), and PyG's ``NeighborLoader`` when pyg-lib or torch-sparse is installed;
* remote: no cache and no prefetch, prefetch 2, static / SIEVE / static+SIEVE caches at 5% and
  20% of the nodes, the 20% caches with prefetch 2 (two batches made at once on threads of
  the trainer process), and the static one also with prefetch 4, with the server and the trainer
  each pinned to its own half of the cores (the rest share them all), with replies over the
  socket only (no shared-memory segments; payloads through the server's data port, and again
  inside the gRPC replies; and with the rows as bfloat16, lossy), the same three across a
  10 Gbit/s link (``--link-rate``; a server in a network namespace whose loopback `tc ... tbf`
  caps; ``benchmarks.link``, root only), and with 2 loader worker processes;
* a 2-layer GraphSAGE (hidden 256) training epoch (capped at ``--train-batches``) in memory and
  through the remote backend (20% static+SIEVE cache, prefetch 2), back to back ``--rounds``
  times (the table shows the first round);
* the trainer's RSS against a graph with a tenth of the edges (the issue's 2.5M vs 25M);
* paired rounds: the engine in memory (on every core, and on the trainer's half of them) and the
  target row (static 20% cache, prefetch 2), shared, with the server on its own cores, socket
  only (shared cores, then on its own cores), socket only with bfloat16 rows, and at prefetch 4
  shared and socket only on its own cores, run back to back ``--rounds`` times (default 3),
  with each round's ratio and their median, because a shared machine's speed drifts between
  the rows of one run. Socket only with the server on its own cores is the nearest this one
  machine comes to a trainer on another host; those rows are also compared with the engine on
  the trainer's cores, as two hosts of half this machine each would compare (the engine in
  memory has only the trainer host's cores; the server's are another machine's).

Per configuration: batches/s, feature MB/s delivered to the trainer, wire MB per batch (server
Stats: socket bytes plus the reply bytes written into the trainer's shared-memory segments),
p50/p99 of the time the loop waits for a batch, cache hit rate (static / dynamic), peak
trainer RSS, stall fraction, CPU time per batch of the trainer (all its threads and loader
workers) and of the server, and batches/s as a ratio to the fastest in-memory loader of the
run. The summary says how fast the issue's target row (20% cache, prefetch 2) could go if the
trainer and server kept every core of this machine busy. Writes
``benchmarks/results/loader.md`` and ``loader.png``.

The graph's out-degree exponent defaults to 2.1 (``--out-degree-exponent``; the generator's own
default, 3.0, is mildly skewed: the best 20% hot set covers ~41% of a batch's nodes at 1M nodes,
against ~67% at 2.1, the skew of web and social graphs a degree-based cache is built for).

    nice python -m benchmarks.loader --small   # 100k nodes, 2.5M edges: a few minutes
    nice python -m benchmarks.loader           # 1M nodes, 25M edges
    nice python -m benchmarks.loader --paired-only  # only the paired rounds: 10 to 20 minutes
"""
from __future__ import annotations

import argparse
import importlib.util
import logging
import multiprocessing
import os
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import psutil
import torch
import torch.nn.functional as F
from torch import Tensor

from benchmarks.link import capped_loopback
from benchmarks.results_page import RESULTS, write_page
from gnnstore.backend.server.server_process import ServerProcess
from gnnstore.ingest.generator import generate_graph
from gnnstore.ingest.graph_ingest import ingest_graph
from gnnstore.stores.data_dir import open_stores

NODE_ATTRS = ("x", "y", "train_mask", "val_mask", "test_mask")
NUM_CLASSES = 10
ENGINE = "in-memory: gnnstore engine"
ENGINE_ON_TRAINER_CORES = f"{ENGINE}, on the trainer's cores"
"""The engine pinned where a trainer ``apart`` from its server runs: the in-memory baseline of
a trainer host whose server is another machine."""
TARGET = "remote: static 20%, prefetch 2"
"""The issue's target row: a 20% cache and prefetch 2, at 0.8x in-memory batches/s or better."""
SOCKET_ONLY = f"{TARGET}, socket only"
"""The target row as a trainer on another machine gets it: no shared-memory replies (payloads
through the server's data port)."""
LOSSY = "bfloat16 rows (lossy)"
DEEPER = "remote: static 20%, prefetch 4"
"""The target row with four batches in flight: the server has the next request queued while the
trainer assembles a batch, where at prefetch 2 one of the two sides often waits."""
THROUGH_GRPC = "through gRPC"
"""A socket-only row's twin without the data port: every payload inside the gRPC reply."""
LINK_RATE = "10gbit"
"""The link between hosts the cross-host row stands in for (``tc`` units)."""


@dataclass(frozen=True)
class Phase:
    """One configuration, run in its own trainer process."""

    name: str
    kind: str  # "engine", "pyg", "remote"
    fanouts: tuple[int, ...]
    batch_size: int
    warmup: int
    batches: int
    graph_file: str = ""
    address: str = ""
    server_pid: int = 0
    cache_fraction: float = 0.0
    policy: str = "static+sieve"
    prefetch: int = 0
    workers: int = 0
    train: bool = False
    shared_memory: bool = True  # replies through shared-memory segments (else the socket only)
    use_data_port: bool = True  # without shared memory: large replies through the server's data port
    apart: bool = False  # server and trainer each on half of the cores (an engine row: on the trainer's half)
    token: str = ""  # the bearer token of a server with tokens (an admin's: Stats is read too)
    tls_ca: str = ""  # the CA file of a TLS server
    wire_dtype: str = ""  # rows of float attrs travel as this 16-bit float (lossy); "": exact
    also_against: str = ""  # in paired rounds, the name of a second in-memory row to compare with
    device: str = "cpu"  # where batches (and the model) go; a remote row's cache lives there too

    def connection(self) -> dict[str, object]:
        """``connect``'s arguments for this phase's server."""
        return {"shared_memory": self.shared_memory, "use_data_port": self.use_data_port, "token": self.token,
                "tls": self.tls_ca or False}


@dataclass(frozen=True)
class Result:
    """What one configuration measured."""

    phase: Phase
    batches_per_s: float
    feature_mb_per_s: float
    wire_mb_per_batch: float | None
    p50_ms: float
    p99_ms: float
    hit_rate: float | None
    static_hit_rate: float | None
    rss_mb: float
    stall_fraction: float
    trainer_cpu_ms: float
    server_cpu_ms: float | None
    server_major_faults: float | None = None  # a batch
    server_disk_mb: float | None = None  # storage bytes the server read, a batch


def _graph_tensors(path: str) -> dict[str, Tensor]:
    return torch.load(path, weights_only=True)


def _loader(phase: Phase, seeds: Tensor) -> tuple[object, object | None]:
    """The phase's loader (an iterable of batches) and its feature cache, if any."""
    from torch_geometric.data import Data
    from torch_geometric.loader import NeighborLoader, NodeLoader

    from gnnstore.backend.engine.sampler import SnapshotNeighborSampler
    from gnnstore.backend.engine.topology import TopologySnapshot
    from gnnstore.client import Prefetcher, RemoteNeighborSampler, connect

    fanouts, cache = list(phase.fanouts), None
    if phase.kind in ("engine", "pyg"):
        data = Data(**_graph_tensors(phase.graph_file))
        if phase.kind == "pyg":
            loader = NeighborLoader(data, fanouts, input_nodes=seeds, batch_size=phase.batch_size)
        else:
            sampler = SnapshotNeighborSampler(TopologySnapshot.from_data(data), fanouts)
            loader = NodeLoader(data, node_sampler=sampler, input_nodes=seeds, batch_size=phase.batch_size)
    else:
        fs, gs = connect(phase.address, **phase.connection(), wire_dtype=phase.wire_dtype or None)
        cache_bytes = int(phase.cache_fraction * sum(
            s.row_bytes * s.shape[0] for s in fs.schema()
        ))
        if cache_bytes:
            fs.connection.close()
            fs, gs = connect(
                phase.address, cache_bytes=cache_bytes, cache_policy=phase.policy, **phase.connection(),
                wire_dtype=phase.wire_dtype or None, cache_device=phase.device,
            )
            cache = fs.cache
        sampler = RemoteNeighborSampler(fs, fanouts, feature_store=fs)
        loader = NodeLoader((fs, gs), node_sampler=sampler, input_nodes=seeds, batch_size=phase.batch_size,
                            num_workers=phase.workers)
    if not phase.prefetch:
        return loader, cache
    return Prefetcher(loader, depth=phase.prefetch, device=None if phase.device == "cpu" else phase.device), cache


def _wire_bytes(phase: Phase) -> int:
    from gnnstore.client import Connection, server_stats

    stats = server_stats(Connection(phase.address, **phase.connection()))
    return sum(m.bytes_sent + m.bytes_shared + m.bytes_received for m in stats.values())


def cpu_seconds(process: psutil.Process, with_children: bool = False) -> float:
    """User + system CPU seconds of ``process`` (and of its live children, e.g. loader workers).

    Read from each process's CPU clock (nanoseconds, every thread's, those ended too) where Linux
    has one: ``/proc``'s figures count 10 ms ticks, so a short run could measure no CPU at all.
    """
    processes = [process, *(process.children(recursive=True) if with_children else [])]
    return sum(_process_cpu(p) for p in processes)


def _process_cpu(process: psutil.Process) -> float:
    try:  # the kernel's clock id of a process's CPU time (MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED))
        return time.clock_gettime(((~process.pid) << 3) | 2)
    except (OSError, AttributeError):  # not Linux, or the process has gone
        times = process.cpu_times()
        return times.user + times.system


def disk_reads(process: psutil.Process) -> tuple[int, int]:
    """(major page faults, bytes read from storage) of ``process`` so far."""
    fields = Path(f"/proc/{process.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[9]), process.io_counters().read_bytes


def peak_rss_mb(pid: int | str = "self") -> float:
    """A process's peak resident memory in MB (VmHWM: its own and mapped file pages; ``ru_maxrss``
    would include the spawning parent's); this process's by default, NaN once it has exited."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return float("nan")
    kib = next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:")), None)
    return float("nan") if kib is None else kib / 1024


def split_cores() -> tuple[set[int], set[int]]:
    """This machine's cores in two halves: (the trainer's, the server's)."""
    cores = sorted(os.sched_getaffinity(0))
    half = max(1, len(cores) // 2)
    return set(cores[:half]), set(cores[half:] or cores)


def pin_process(pid: int, cores: set[int]) -> None:
    """Run every thread of ``pid`` on ``cores`` (threads it starts later inherit them)."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            os.sched_setaffinity(int(task.name), cores)
        except ProcessLookupError:  # the thread ended meanwhile
            continue


def run_phase(phase: Phase, seeds: Tensor) -> Result:
    """Run one configuration in this (fresh) process and measure it."""
    if phase.apart:
        cores, _ = split_cores()
        os.sched_setaffinity(0, cores)
        torch.set_num_threads(len(cores))
    torch.manual_seed(0)
    loader, cache = _loader(phase, seeds)
    batches = iter(loader)
    model = optimizer = None
    for _ in range(phase.warmup):
        next(batches)
    if cache is not None:
        cache.start_epoch()
    wire = _wire_bytes(phase) if phase.address else 0
    trainer, server = psutil.Process(), psutil.Process(phase.server_pid) if phase.server_pid else None
    trainer_cpu = cpu_seconds(trainer, with_children=True)
    server_cpu = cpu_seconds(server) if server is not None else 0.0
    server_reads = disk_reads(server) if server is not None else (0, 0)
    waits, feature_bytes = [], 0
    started = time.perf_counter()
    for _ in range(phase.batches):
        asked = time.perf_counter()
        batch = next(batches)
        if phase.device != "cpu":
            batch = batch.to(phase.device)  # a no-op for what the loader already put there
        waits.append(time.perf_counter() - asked)
        feature_bytes += sum(batch[a].numel() * batch[a].element_size() for a in NODE_ATTRS)
        if phase.train:
            if model is None:
                from torch_geometric.nn.models import GraphSAGE

                model = GraphSAGE(batch.x.shape[1], 256, 2, NUM_CLASSES).to(phase.device)
                optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
            optimizer.zero_grad()
            out = model(batch.x, batch.edge_index)[: batch.batch_size]
            F.cross_entropy(out, batch.y[: batch.batch_size]).backward()
            optimizer.step()
    if phase.device.startswith("cuda"):
        torch.cuda.synchronize(phase.device)  # the clock stops when the device's work is done
    seconds = time.perf_counter() - started
    trainer_cpu = cpu_seconds(trainer, with_children=True) - trainer_cpu
    server_cpu = cpu_seconds(server) - server_cpu if server is not None else None
    server_reads = [now - then for now, then in zip(disk_reads(server), server_reads)] if server is not None else None
    wire = (_wire_bytes(phase) - wire) / phase.batches / 1e6 if phase.address else None
    close = getattr(loader, "close", None)
    if close is not None:
        close()
    stats = cache.stats() if cache is not None and not phase.workers else None  # workers hold copies
    lookups = max(stats.hits + stats.misses, 1) if stats is not None else 1
    return Result(
        phase,
        phase.batches / seconds,
        feature_bytes / seconds / 1e6,
        wire,
        float(np.percentile(waits, 50)) * 1e3,
        float(np.percentile(waits, 99)) * 1e3,
        None if stats is None else stats.hit_rate,
        None if stats is None else stats.static_hits / lookups,
        peak_rss_mb(),
        sum(waits) / seconds,
        trainer_cpu / phase.batches * 1e3,
        None if server_cpu is None else server_cpu / phase.batches * 1e3,
        None if server_reads is None else server_reads[0] / phase.batches,
        None if server_reads is None else server_reads[1] / phase.batches / 1e6,
    )


def in_fresh_process(phase: Phase, seeds: Tensor) -> Result:
    """``run_phase`` in a new spawned process (its own imports, memory and RSS)."""
    context = multiprocessing.get_context("spawn")
    pinned = phase.apart and phase.server_pid
    if pinned:
        pin_process(phase.server_pid, split_cores()[1])
    try:
        with ProcessPoolExecutor(1, mp_context=context) as pool:
            result = pool.submit(run_phase, phase, seeds).result()
    finally:
        if pinned:
            pin_process(phase.server_pid, os.sched_getaffinity(0))
    _print(result)
    return result


def prepare(nodes: int, avg_degree: float, dim: int, exponent: float, folder: Path) -> tuple[Path, Path, Tensor]:
    """Generate the graph, save its tensors, ingest it; return (tensors file, data dir, train ids)."""
    started = time.perf_counter()
    graph = generate_graph(nodes, avg_degree, dim, NUM_CLASSES, seed=0, out_degree_exponent=exponent)
    tensors = folder / "graph.pt"
    torch.save({k: graph[k] for k in (*NODE_ATTRS, "edge_index")} | {"num_nodes": nodes}, tensors)
    generated = time.perf_counter() - started
    with open_stores(folder / "data") as stores:
        ingest_graph(graph, stores)
    print(
        f"graph {folder.name}: {nodes:,} nodes, {graph.num_edges:,} edges, {dim} float32 features, "
        f"out-degree exponent {exponent}: generated in {generated:.0f} s, ingested in "
        f"{time.perf_counter() - started - generated:.0f} s", flush=True,
    )
    return tensors, folder / "data", torch.nonzero(graph.train_mask).flatten()


def _print(r: Result) -> None:
    hit = "" if r.hit_rate is None else f" hit {r.hit_rate:.1%} (static {r.static_hit_rate:.1%})"
    server = "" if r.server_cpu_ms is None else f" + server {r.server_cpu_ms:.1f}"
    print(
        f"{r.phase.name:<34} {r.batches_per_s:7.2f} batches/s  p50 {r.p50_ms:7.1f} ms  "
        f"p99 {r.p99_ms:7.1f} ms  RSS {r.rss_mb:6.0f} MB  stall {r.stall_fraction:.0%}  "
        f"CPU/batch {r.trainer_cpu_ms:.1f}{server} ms{hit}",
        flush=True,
    )


def table(results: list[Result], base: float, train_base: float) -> str:
    """The results as a Markdown table, ratios to the fastest in-memory loader (or training)."""
    lines = [
        "| configuration | batches/s | × in-memory | feature MB/s | wire MB/batch | p50 ms | p99 ms "
        "| hit rate (static) | trainer RSS MB | stall | CPU ms/batch: trainer | server |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        ratio = r.batches_per_s / (train_base if r.phase.train else base)
        wire = "—" if r.wire_mb_per_batch is None else f"{r.wire_mb_per_batch:.1f}"
        hit = "—" if r.hit_rate is None else f"{r.hit_rate:.1%} ({r.static_hit_rate:.1%})"
        server_cpu = "—" if r.server_cpu_ms is None else f"{r.server_cpu_ms:.1f}"
        lines.append(
            f"| {r.phase.name} | {r.batches_per_s:.2f} | {ratio:.2f} | {r.feature_mb_per_s:.0f} | "
            f"{wire} | {r.p50_ms:.1f} | {r.p99_ms:.1f} | {hit} | {r.rss_mb:.0f} | "
            f"{r.stall_fraction:.0%} | {r.trainer_cpu_ms:.1f} | {server_cpu} |"
        )
    return "\n".join(lines)


def cpu_ceiling(target: Result, engine: Result, base: float) -> str:
    """How fast ``target`` could go if its trainer and server kept every core here busy."""
    cores = len(os.sched_getaffinity(0))
    total = target.trainer_cpu_ms + (target.server_cpu_ms or 0.0)
    best = cores * 1e3 / total
    return (
        f"CPU a batch, {target.phase.name}: trainer {target.trainer_cpu_ms:.1f} ms + server "
        f"{target.server_cpu_ms or 0.0:.1f} ms = {total:.1f} ms (in-memory engine: {engine.trainer_cpu_ms:.1f} ms); "
        f"on the {cores} cores here that row cannot pass {best:.0f} batches/s ({best / base:.2f}× in memory) "
        f"even with both processes busy all the time.\n"
    )


def _across_a_link(
    data_dir: Path, work: Path, phases: list[Phase], seeds: Tensor, rate: str = LINK_RATE
) -> list[Result]:
    """``phases`` against a server behind a loopback capped at ``rate`` (``benchmarks.link``),
    or no rows where this machine cannot make one."""
    with capped_loopback(rate) as refused:
        if refused:
            print(f"{phases[0].name}: skipped ({refused})", flush=True)
            return []
        with ServerProcess(data_dir, "--read-only", log=work / "server-link.log", startup_timeout=3600) as far:
            return [in_fresh_process(replace(p, address=far.address, server_pid=far.proc.pid), seeds) for p in phases]


def paired_phases(common: Phase, remote: Phase) -> tuple[Phase, list[Phase]]:
    """The in-memory engine and the rows run beside it in each paired round (``remote``: a
    remote row of the benchmark's server)."""
    engine = replace(common, name=ENGINE, kind="engine")
    target = replace(remote, name=TARGET, cache_fraction=0.2, policy="static", prefetch=2)
    socket_only = replace(target, name=SOCKET_ONLY, shared_memory=False)
    return engine, [
        replace(engine, name=ENGINE_ON_TRAINER_CORES, apart=True),
        target,
        replace(target, name=f"{TARGET}, server on its own cores", apart=True),
        socket_only,
        replace(socket_only, name=f"{SOCKET_ONLY}, server on its own cores", apart=True,
                also_against=ENGINE_ON_TRAINER_CORES),
        replace(socket_only, name=f"{SOCKET_ONLY}, {LOSSY}", wire_dtype="bfloat16"),
        replace(target, name=DEEPER, prefetch=4),
        replace(socket_only, name=f"{DEEPER}, socket only, server on its own cores", prefetch=4, apart=True,
                also_against=ENGINE_ON_TRAINER_CORES),
    ]


def training_phases(common: Phase, remote: Phase, batches: int) -> tuple[Phase, Phase]:
    """A GraphSAGE training epoch of ``batches`` in memory and through ``remote``'s server
    (static+SIEVE 20% cache, prefetch 2)."""
    train = replace(common, kind="engine", batches=batches, warmup=0, train=True)
    return replace(train, name="train epoch: in memory"), replace(
        train, name="train epoch: remote static+sieve 20%, prefetch 2", kind="remote", graph_file="",
        address=remote.address, server_pid=remote.server_pid, cache_fraction=0.2, prefetch=2,
    )


def paired_rounds(engine: Phase, remotes: list[Phase], seeds: Tensor, rounds: int) -> list[list[Result]]:
    """The in-memory engine and each of ``remotes`` run back to back, ``rounds`` times: on a
    machine whose speed drifts, each round's ratios compare rows measured minutes apart at most."""
    return [[in_fresh_process(p, seeds) for p in (engine, *remotes)] for _ in range(rounds)]


def all_paired_rounds(
    common: Phase, remote: Phase, seeds: Tensor, rounds: int, train_batches: int
) -> tuple[list[list[Result]], list[list[Result]]]:
    """The paired rounds of the loaders (``paired_phases``) and of the training epoch."""
    loaders = paired_rounds(*paired_phases(common, remote), seeds, rounds)
    in_memory, through_server = training_phases(common, remote, train_batches)
    return loaders, paired_rounds(in_memory, [through_server], seeds, rounds)


def paired_summary(rounds: list[list[Result]]) -> str:
    """A line per row after the first: every round's batches/s against the first row's (the
    engine's), and the median ratio; a second line for a row that names ``also_against``."""
    if not rounds:
        return ""
    names = [r.phase.name for r in rounds[0]]
    lines = []
    for column, phase in enumerate((r.phase for r in rounds[0][1:]), start=1):
        for base in (0, *([names.index(phase.also_against)] if phase.also_against else [])):
            ratios = [r[column].batches_per_s / r[base].batches_per_s for r in rounds]
            each = ", ".join(
                f"{r[base].batches_per_s:.1f} vs {r[column].batches_per_s:.1f} ({ratio:.2f}×)"
                for r, ratio in zip(rounds, ratios)
            )
            lines.append(
                f"Paired rounds, {names[base]} vs {phase.name}: {each}; median {float(np.median(ratios)):.2f}×.\n"
            )
    return "".join(lines)


def two_host_projection(engine: Result, remote: Result) -> float:
    """How much faster than ``engine`` a remote row's trainer and server would go on two hosts
    of their own, if CPU bounds both: the engine's CPU a batch over the larger of theirs (NaN when
    a short run measured no CPU on either side: the clock counts in ticks)."""
    busiest = max(remote.trainer_cpu_ms, remote.server_cpu_ms or 0.0)
    return engine.trainer_cpu_ms / busiest if busiest else float("nan")


def cpu_summary(rounds: list[list[Result]]) -> str:
    """A line per remote row of the paired rounds: its trainer's and server's CPU a batch against
    the engine's (the first row) in each round, the two-host projection, and their medians."""
    if not rounds:
        return ""
    lines = []
    for column, phase in enumerate(r.phase for r in rounds[0]):
        if phase.kind != "remote":
            continue
        pairs = [(r[0], r[column]) for r in rounds]
        each = "; ".join(
            f"trainer {row.trainer_cpu_ms:.1f} / server {row.server_cpu_ms or 0.0:.1f} / engine "
            f"{engine.trainer_cpu_ms:.1f} ms" for engine, row in pairs
        )
        trainer = float(np.median([row.trainer_cpu_ms / engine.trainer_cpu_ms for engine, row in pairs]))
        server = float(np.median([(row.server_cpu_ms or 0.0) / engine.trainer_cpu_ms for engine, row in pairs]))
        projection = float(np.median([two_host_projection(engine, row) for engine, row in pairs]))
        lines.append(
            f"CPU a batch, {phase.name}: {each}; medians: trainer {trainer:.2f}×, server {server:.2f}× the "
            f"engine's, two-host projection {projection:.2f}×.\n"
        )
    return "".join(lines)


def chart(results: list[Result], base: float, train_base: float, path: Path) -> None:
    """Bars of batches/s relative to in memory, with the issue's targets marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [r.phase.name for r in results]
    ratios = [r.batches_per_s / (train_base if r.phase.train else base) for r in results]
    fig, ax = plt.subplots(figsize=(9, 0.4 * len(results) + 1.5))
    colors = ["tab:gray" if r.phase.kind != "remote" else "tab:blue" for r in results]
    ax.barh(names[::-1], ratios[::-1], color=colors[::-1])
    ax.axvline(0.8, color="tab:red", linestyle="--", label="loader target 0.8×")
    ax.axvline(0.9, color="tab:orange", linestyle=":", label="training target 0.9×")
    ax.set_xlabel("batches/s relative to the in-memory baseline of the same run")
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def graph_arguments(parser: argparse.ArgumentParser) -> None:
    """The generated graph's options (the loader benchmark's graph by default)."""
    parser.add_argument("--nodes", type=int, default=1_000_000)
    parser.add_argument("--avg-degree", type=float, default=25.0)
    parser.add_argument("--dim", type=int, default=100)
    parser.add_argument("--out-degree-exponent", type=float, default=2.1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    graph_arguments(parser)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--fanouts", type=int, nargs="+", default=[15, 10])
    parser.add_argument("--warmup", type=int, default=10, help="batches before timing (fills caches)")
    parser.add_argument("--batches", type=int, default=200, help="batches timed per loader configuration")
    parser.add_argument("--train-batches", type=int, default=50, help="batches of the training epoch")
    parser.add_argument("--rounds", type=int, default=3,
                        help="paired rounds of the in-memory engine and the target rows (and of the training "
                             "epoch), alternately")
    parser.add_argument("--small", action="store_true", help="100k nodes, 20 batches, 10 training batches")
    parser.add_argument("--link-rate", default=LINK_RATE,
                        help="the cross-host rows' link, in tc units (default 10gbit; e.g. 1gbit)")
    parser.add_argument("--work-dir", type=Path, default=None, help="default: a temporary folder")
    parser.add_argument("--paired-only", action="store_true",
                        help="only the paired rounds (the issue's target rows beside the engine): a quicker run")
    args = parser.parse_args()
    if args.small:
        args.nodes, args.batches, args.train_batches = 100_000, 20, 10
    logging.basicConfig(level=logging.WARNING)
    has_pyg_sampler = any(importlib.util.find_spec(m) for m in ("pyg_lib", "torch_sparse"))
    print(f"torch threads per trainer: {torch.get_num_threads()}; pyg-lib/torch-sparse: "
          f"{has_pyg_sampler}", flush=True)
    with tempfile.TemporaryDirectory(dir=args.work_dir, prefix="gnnstore-loader-") as tmp:
        work = Path(tmp)
        (work / "full").mkdir()
        (work / "tenth").mkdir()
        tensors, data_dir, train_ids = prepare(
            args.nodes, args.avg_degree, args.dim, args.out_degree_exponent, work / "full"
        )
        order = torch.randperm(train_ids.numel(), generator=torch.Generator().manual_seed(1))
        seeds = train_ids[order][: (args.warmup + max(args.batches, args.train_batches)) * args.batch_size]
        common = Phase("", "", tuple(args.fanouts), args.batch_size, args.warmup, args.batches,
                       graph_file=str(tensors))
        if args.paired_only:
            with ServerProcess(data_dir, "--read-only", log=work / "server.log", startup_timeout=3600) as server:
                remote = replace(common, kind="remote", graph_file="", address=server.address,
                                 server_pid=server.proc.pid)
                rounds, train_rounds = all_paired_rounds(common, remote, seeds, args.rounds, args.train_batches)
            print("\n" + paired_summary(rounds) + paired_summary(train_rounds) + cpu_summary(rounds))
            return
        _, tenth_dir, tenth_ids = prepare(
            args.nodes // 10, args.avg_degree, args.dim, args.out_degree_exponent, work / "tenth"
        )
        results = [in_fresh_process(replace(common, name=ENGINE, kind="engine"), seeds)]
        if has_pyg_sampler:
            results.append(in_fresh_process(replace(common, name="in-memory: PyG NeighborLoader", kind="pyg"), seeds))
        else:
            print("in-memory: PyG NeighborLoader: skipped (neither pyg-lib nor torch-sparse is installed; "
                  "README: Tests and benchmarks)")
        base = max(r.batches_per_s for r in results)
        started = time.perf_counter()
        with ServerProcess(data_dir, "--read-only", log=work / "server.log", startup_timeout=3600) as server:
            print(f"server up in {time.perf_counter() - started:.0f} s: {server.startup_line[:120]}", flush=True)
            remote = replace(
                common, kind="remote", graph_file="", address=server.address, server_pid=server.proc.pid
            )
            configs = [
                (f"remote: {policy} {share:.0%}", share, policy, 0)
                for share in (0.05, 0.2) for policy in ("static", "sieve", "static+sieve")
            ]
            configs += [("remote: no cache", 0.0, "static", 0), ("remote: no cache, prefetch 2", 0.0, "static", 2)]
            configs += [(TARGET, 0.2, "static", 2), ("remote: static+sieve 20%, prefetch 2", 0.2, "static+sieve", 2)]
            for name, share, policy, prefetch in configs:
                results.append(in_fresh_process(
                    replace(remote, name=name, cache_fraction=share, policy=policy, prefetch=prefetch), seeds
                ))
            results.append(in_fresh_process(replace(
                remote, name=DEEPER, cache_fraction=0.2, policy="static", prefetch=4,
            ), seeds))
            results.append(in_fresh_process(replace(
                remote, name=f"{TARGET}, server on its own cores", cache_fraction=0.2,
                policy="static", prefetch=2, apart=True,
            ), seeds))
            socket_only = replace(remote, name=SOCKET_ONLY, cache_fraction=0.2, policy="static", prefetch=2,
                                  shared_memory=False)
            rounded = replace(socket_only, name=f"{SOCKET_ONLY}, {LOSSY}", wire_dtype="bfloat16")
            for phase in (socket_only, replace(socket_only, name=f"{SOCKET_ONLY}, {THROUGH_GRPC}", use_data_port=False),
                          replace(socket_only, name=f"{SOCKET_ONLY}, server on its own cores", apart=True), rounded):
                results.append(in_fresh_process(phase, seeds))  # what shared memory / the data port bring
            linked = replace(socket_only, name=f"{SOCKET_ONLY}, {args.link_rate} link")
            results += _across_a_link(data_dir, work, [
                linked, replace(linked, name=f"{linked.name}, {THROUGH_GRPC}", use_data_port=False),
                replace(linked, name=f"{linked.name}, {LOSSY}", wire_dtype="bfloat16"),
            ], seeds, args.link_rate)
            results.append(in_fresh_process(replace(  # worker processes instead of threads
                remote, name="remote: static 20%, prefetch 2, 2 workers", cache_fraction=0.2,
                policy="static", prefetch=2, workers=2,
            ), seeds))
            rounds, train_rounds = all_paired_rounds(common, remote, seeds, args.rounds, args.train_batches)
            memory_train, remote_train = train_rounds[0]
            results += [memory_train, remote_train]
        draw = torch.randint(tenth_ids.numel(), (seeds.numel(),), generator=torch.Generator().manual_seed(1))
        tenth_seeds = tenth_ids[draw]  # with replacement: as many batches as on the full graph
        with ServerProcess(tenth_dir, "--read-only", log=work / "server-tenth.log", startup_timeout=3600) as small:
            tenth = in_fresh_process(replace(
                remote, name="remote: no cache, prefetch 2 (1/10 of the edges)", address=small.address,
                server_pid=small.proc.pid,
                prefetch=2,
            ), tenth_seeds)
        results.append(tenth)
    named = {r.phase.name: r for r in results}
    full_rss = named["remote: no cache, prefetch 2"].rss_mb
    text = table(results, base, memory_train.batches_per_s)
    summary = (
        f"\nGraph: {args.nodes:,} nodes, ~{int(args.nodes * args.avg_degree):,} edges, {args.dim} float32 "
        f"features, out-degree exponent {args.out_degree_exponent}; {args.batch_size} seeds per batch, "
        f"fanouts {args.fanouts}; {args.batches} timed batches after {args.warmup} warm-up.\n"
        f"Trainer RSS, remote without cache: {full_rss:.0f} MB on the full graph vs {tenth.rss_mb:.0f} MB "
        f"with a tenth of the edges: {full_rss - tenth.rss_mb:+.0f} MB.\n"
        + cpu_ceiling(named[TARGET], named[ENGINE], base)
        + paired_summary(rounds)
        + paired_summary(train_rounds)
        + cpu_summary(rounds)
    )
    print("\n" + text + summary)
    command = " ".join(["python -m benchmarks.loader", *sys.argv[1:]])
    page = write_page("loader", "Loading and training: in memory vs. through a server", command,
                      text + "\n" + summary + "\n![batches/s as a ratio to in memory](loader.png)")
    chart(results, base, memory_train.batches_per_s, RESULTS / "loader.png")
    print(f"wrote {page} and {RESULTS / 'loader.png'}")


if __name__ == "__main__":
    main()
