"""Neighbour sampling speed: this engine against the pure-torch reference (and PyG's kernel if installed).

One run, one generated power-law graph (``gnnstore.ingest.generator``), one core: the same
random batches of seeds go through this engine (in-memory snapshot and memory-mapped
snapshot; disjoint, temporal and weighted beside each other), the pure-torch
``TorchNeighborSampler`` of ``tests/reference`` and, when pyg-lib
or torch-sparse is importable, PyG's ``NeighborSampler``. Prints batches/s, sampled edges/s
and the ratio of the engine to each baseline.

    nice taskset -c 0 python -m benchmarks.sampling            # 1M nodes, 25M edges
    nice taskset -c 0 python -m benchmarks.sampling --small    # 100k nodes, 2.5M edges
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch_geometric.data import Data

from gnnstore.backend.engine.sampler import SamplingEngine
from gnnstore.backend.engine.temporal_index import TemporalRequest
from gnnstore.backend.engine.topology import TopologySnapshot
from gnnstore.ingest.generator import generate_graph

EXAMPLES = Path(__file__).resolve().parents[1] / "tests" / "reference"


def measure(name: str, sample: Callable[[torch.Tensor], object], batches: list[torch.Tensor]) -> float:
    """Run ``sample`` on every batch (after one warm-up); print and return batches/s."""
    sample(batches[0])
    edges = nodes = 0
    start = time.perf_counter()
    for seeds in batches:
        out = sample(seeds)
        edges += out.edge.numel()
        nodes += out.node.numel()
    seconds = time.perf_counter() - start
    rate = len(batches) / seconds
    print(
        f"{name:<34} {rate:8.1f} batches/s  {edges / seconds / 1e6:7.2f} M sampled edges/s  "
        f"{nodes / len(batches):9.0f} nodes/batch  ({len(batches)} batches, {seconds:.2f} s)"
    )
    return rate


def measure_temporal(engine: SamplingEngine, fanouts: list[int], batches: list[torch.Tensor]) -> None:
    """Temporal sampling (random node times) beside disjoint sampling, which it always is: seeds
    at the latest time (every neighbour allowed: the same work) and at the median time."""
    times = torch.randint(0, 1 << 30, (engine.snapshot.num_nodes[None],), generator=torch.Generator().manual_seed(1))
    start = time.perf_counter()
    index = engine.temporal_index({None: times.numpy()})
    print(f"temporal index (CSC sorted by source time): {time.perf_counter() - start:.1f} s")
    disjoint = measure("engine, disjoint", lambda s: engine.sample(s, fanouts, disjoint=True), batches)
    for label, at in (("latest", 1 << 30), ("median", 1 << 29)):
        for last in (False, True):
            request = TemporalRequest(index, {None: torch.full((batches[0].numel(),), at)}, last)
            rate = measure(f"temporal {'last' if last else 'uniform'}, {label} seeds",
                           lambda s, r=request: engine.sample(s, fanouts, temporal=r), batches)
            print(f"  ratio temporal / disjoint: {rate / disjoint:.2f}x")


def measure_weighted(engine: SamplingEngine, fanouts: list[int], batches: list[torch.Tensor], uniform: float) -> None:
    """Weighted sampling (random weights in [0, 1)) beside uniform sampling of the same seeds."""
    weights = torch.rand(engine.snapshot.edges[None].num_edges, generator=torch.Generator().manual_seed(2))
    start = time.perf_counter()
    index = engine.weight_index({None: weights.double().numpy()})
    print(f"weight index (weights in CSC order): {time.perf_counter() - start:.1f} s")
    for replace in (False, True):
        rate = measure(f"weighted, replace={replace}",
                       lambda s, r=replace: engine.sample(s, fanouts, replace=r, weights=index), batches)
        print(f"  ratio weighted / uniform: {rate / uniform:.2f}x")


def reference_sampler(data: Data, fanouts: list[int]) -> Callable[[torch.Tensor], object] | None:
    """The pure-torch ``TorchNeighborSampler`` over PyG's reference stores, or ``None`` if absent."""
    if not (EXAMPLES / "torch_sampler.py").is_file():
        print(f"reference sampler not found at {EXAMPLES}: skipped")
        return None
    sys.path.insert(0, str(EXAMPLES))
    import torch_sampler

    graph_store = torch_sampler.MyGraphStore()
    graph_store.put_edge_index(
        tuple(data.edge_index), edge_type=None, layout="coo", size=(data.num_nodes, data.num_nodes)
    )
    sampler = torch_sampler.TorchNeighborSampler((torch_sampler.MyFeatureStore(), graph_store), fanouts)
    return sampler._sample


def pyg_sampler(data: Data, fanouts: list[int]) -> Callable[[torch.Tensor], object] | None:
    """PyG's ``NeighborSampler`` (pyg-lib or torch-sparse kernel), or ``None`` when neither is installed."""
    if not any(importlib.util.find_spec(m) for m in ("pyg_lib", "torch_sparse")):
        print("PyG's kernel: neither pyg-lib nor torch-sparse is installed: skipped "
              "(README: Tests and benchmarks)")
        return None
    from torch_geometric.sampler import NeighborSampler, NodeSamplerInput

    sampler = NeighborSampler(data, fanouts)
    return lambda seeds: sampler.sample_from_nodes(NodeSamplerInput(None, seeds))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1_000_000)
    parser.add_argument("--avg-degree", type=float, default=25.0)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--fanouts", type=int, nargs="+", default=[15, 10])
    parser.add_argument("--batches", type=int, default=100, help="batches timed for the engine")
    parser.add_argument("--baseline-batches", type=int, default=10, help="batches timed for baselines")
    parser.add_argument("--small", action="store_true", help="100k nodes, 30 batches")
    args = parser.parse_args()
    if args.small:
        args.nodes, args.batches = 100_000, 30
    torch.set_num_threads(1)
    print(f"cpus allowed: {sorted(os.sched_getaffinity(0))} (pin with taskset -c 0); torch threads: 1")

    start = time.perf_counter()
    data = generate_graph(args.nodes, args.avg_degree, 1, 2, seed=0)
    print(f"graph: {data.num_nodes} nodes, {data.num_edges} edges ({time.perf_counter() - start:.1f} s)")
    start = time.perf_counter()
    snapshot = TopologySnapshot.from_data(data)
    print(f"in-memory snapshot: {time.perf_counter() - start:.1f} s")

    perm = torch.randperm(data.num_nodes, generator=torch.Generator().manual_seed(0))
    batches = list(perm[: args.batches * args.batch_size].split(args.batch_size))
    rates = {}
    engine = SamplingEngine(snapshot)
    rates["engine"] = measure(
        "engine (in-memory snapshot)", lambda s: engine.sample(s, args.fanouts), batches
    )
    with tempfile.TemporaryDirectory() as tmp:
        mapped = SamplingEngine(snapshot.save(tmp))
        measure("engine (memory-mapped snapshot)", lambda s: mapped.sample(s, args.fanouts), batches)
    measure_temporal(engine, args.fanouts, batches)
    measure_weighted(engine, args.fanouts, batches, rates["engine"])
    few = batches[: args.baseline_batches]
    for name, make in (("pure-torch reference", reference_sampler), ("PyG NeighborSampler", pyg_sampler)):
        sample = make(data, args.fanouts)
        if sample is not None:
            rates[name] = measure(name, sample, few)
            print(f"  ratio engine / {name}: {rates['engine'] / rates[name]:.1f}x")


if __name__ == "__main__":
    main()
