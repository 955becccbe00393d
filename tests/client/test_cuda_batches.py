"""Batches on a device through a real server: a cache on the device and a ``Prefetcher`` onto
it give the batches the plain CPU path gives, row for row, epoch after epoch (hits included).

The ``cpu`` cases run everywhere; the ``cuda`` ones need a device (``scripts/gpu-check.sh``
runs them on a GPU machine).
"""
from __future__ import annotations

import pytest
import torch
from served import ServerProcess
from torch_geometric.data import Data, HeteroData
from torch_geometric.loader import NodeLoader

from gnnstore.client import POLICY_NAMES, Prefetcher, RemoteNeighborSampler, connect

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA device; the cpu case runs the same path on the CPU"))]
ROW_BYTES = 8 * 4 + 8 + 3  # x (8 float32), y (int64) and three bool masks of the homo graph


def epochs(address: str, device: str, seeds: object, fanouts: list[int], batch_size: int,
           cache_bytes: int = 0, policy: str = "static", shared_memory: bool = True, prefetch: bool = True,
           count: int = 2) -> list[Data | HeteroData]:
    """``count`` epochs of a loader with a cache on ``device`` (none for ``cache_bytes=0``), its
    batches on ``device``; the same request seeds every time."""
    fs, gs = connect(address, cache_bytes=cache_bytes, cache_policy=policy, cache_device=device,
                     shared_memory=shared_memory)
    batches = []
    for _ in range(count):
        sampler = RemoteNeighborSampler(fs, fanouts, feature_store=fs, seed=7)
        loader = NodeLoader((fs, gs), node_sampler=sampler, input_nodes=seeds, batch_size=batch_size)
        source = Prefetcher(loader, depth=2, device=device) if prefetch else loader
        batches += [batch.to(device) for batch in source]
    return batches


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("policy", POLICY_NAMES)
@pytest.mark.parametrize("shared_memory", [True, False], ids=["segments", "socket"])
def test_a_device_cache_gives_the_cpu_paths_batches(
    homo_server: ServerProcess, homo_graph: Data, device: str, policy: str, shared_memory: bool
) -> None:
    seeds = torch.arange(0, 400, 3)
    want = epochs(homo_server.address, "cpu", seeds, [5, 3], 40, prefetch=False)
    got = epochs(homo_server.address, device, seeds, [5, 3], 40, cache_bytes=120 * ROW_BYTES, policy=policy,
                 shared_memory=shared_memory)
    assert len(got) == len(want) == 8
    for a, b in zip(got, want):
        assert a.x.device.type == device and a.edge_index.device.type == device
        assert torch.equal(a.n_id.cpu(), b.n_id) and torch.equal(a.edge_index.cpu(), b.edge_index)
        for attr in ("x", "y", "train_mask"):
            assert torch.equal(a[attr].cpu(), homo_graph[attr][b.n_id]), attr


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("prefetch", [False, True], ids=["plain", "prefetcher"])
def test_a_device_cache_gives_exact_hetero_batches(
    hetero_server: ServerProcess, hetero_graph: HeteroData, device: str, prefetch: bool
) -> None:
    seeds = ("paper", torch.arange(80))
    want = epochs(hetero_server.address, "cpu", seeds, [3, 2], 16, prefetch=False)
    got = epochs(hetero_server.address, device, seeds, [3, 2], 16, cache_bytes=4000, policy="static+sieve",
                 prefetch=prefetch)
    assert len(got) == len(want) == 10
    for a, b in zip(got, want):
        for node_type in hetero_graph.node_types:
            n_id = b[node_type].n_id
            assert torch.equal(a[node_type].n_id.cpu(), n_id), node_type
            assert a[node_type].x.device.type == device
            assert torch.equal(a[node_type].x.cpu(), hetero_graph[node_type].x[n_id]), node_type
        assert torch.equal(a["paper"].y.cpu(), hetero_graph["paper"].y[b["paper"].n_id])


@pytest.mark.parametrize("device", DEVICES)
def test_a_device_cache_cleared_between_request_and_reply_gives_exact_rows(
    homo_server: ServerProcess, homo_graph: Data, device: str
) -> None:
    fs, gs = connect(homo_server.address, cache_bytes=120 * ROW_BYTES, cache_policy="static+sieve",
                     cache_device=device)
    sampler = RemoteNeighborSampler(fs, [5, 3], feature_store=fs, seed=3)
    sample = sampler.sample_nodes  # a plain loader's and a Prefetcher's way to the server
    sampler.sample_nodes = lambda *args, **kwargs: (sample(*args, **kwargs), fs.cache.clear())[0]
    loader = NodeLoader((fs, gs), node_sampler=sampler, input_nodes=torch.arange(0, 400, 4), batch_size=40)
    for batch in Prefetcher(loader, depth=2, device=device):
        assert batch.x.device.type == device
        assert torch.equal(batch.x.cpu(), homo_graph.x[batch.n_id.cpu()])
    assert fs.exchange.fetched_rows > 0  # what the cleared cache lost came in a second call
