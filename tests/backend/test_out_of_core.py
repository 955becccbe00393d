"""A server whose features are larger than its memory limit: not killed, and every row right.

The server runs in a memory cgroup (``benchmarks/memory_cgroup.py``) limited below its
feature bytes, started with the data directory evicted from the page cache, as a pod would
start on a fresh node. Needs root and a writable cgroup hierarchy; skipped with the reason
otherwise.
"""
from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import torch
from served import ingest
from torch_geometric.data import Data
from torch_geometric.loader import NodeLoader

from benchmarks import memory_cgroup
from benchmarks.out_of_core import evict
from gnnstore.backend.server.server_process import ServerProcess
from gnnstore.client import RemoteNeighborSampler, connect

NODES, DIM = 180_000, 1024  # 737 MB of float32 rows
LIMIT = 700 << 20  # the server (~540 MB with its libraries) and what it reads must fit here


def _rows(ids: np.ndarray) -> np.ndarray:
    """Node ``i``'s row: ``i`` then a ramp, so a misplaced row is never equal by chance."""
    return ids[:, None].astype(np.float32) + np.arange(DIM, dtype=np.float32) / DIM


@pytest.fixture(scope="module")
def big_features(tmp_path_factory: pytest.TempPathFactory) -> Path:
    reason = memory_cgroup.unavailable()
    if reason is not None:
        pytest.skip(reason)
    rng = np.random.default_rng(0)
    edges = rng.integers(0, NODES, (2, NODES * 4))
    data = Data(x=torch.from_numpy(_rows(np.arange(NODES))), edge_index=torch.from_numpy(edges), num_nodes=NODES)
    return ingest(data, tmp_path_factory.mktemp("out-of-core") / "data")


def _epoch(address: str, seed: int) -> int:
    """Batches of one trainer's epoch, each checked against the stored rows."""
    fs, gs = connect(address, shared_memory=False)
    sampler = RemoteNeighborSampler(fs, [5, 5], feature_store=fs)
    seeds = torch.randperm(NODES, generator=torch.Generator().manual_seed(seed))[: 8 * 64]
    loader = NodeLoader((fs, gs), node_sampler=sampler, input_nodes=seeds, batch_size=64)
    batches = 0
    for batch in loader:
        assert batch.x.shape == (batch.n_id.numel(), DIM)
        assert torch.equal(batch.x, torch.from_numpy(_rows(batch.n_id.numpy())))
        batches += 1
    fs.connection.close()
    return batches


def test_a_server_limited_below_its_features_serves_every_row_and_says_its_limit(big_features: Path) -> None:
    evict(big_features)
    with memory_cgroup.MemoryCgroup(LIMIT) as cgroup:
        server = ServerProcess(big_features, log=big_features.parent / "server.log", launcher=cgroup.launcher)
        try:
            line = server.startup_line
            assert re.search(r"feature tier: 0\.69 GiB read straight from disk \(a cache of 0\.\d\d GiB\) \|", line), line
            assert re.search(r"memory limit: 0\.68 GiB \(cgroup v[12] /\S*gnnstore-", line), line
            assert re.search(r"replies' rows: at most 0\.\d\d GiB at once$", line), line
            with ThreadPoolExecutor(2) as trainers:  # two clients' replies at once: within the limit too
                assert list(trainers.map(_epoch, [server.address] * 2, [0, 1])) == [8, 8]
        finally:
            assert server.stop() == 0
        assert cgroup.oom_kills() == 0
