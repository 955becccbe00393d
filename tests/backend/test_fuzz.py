"""The fuzzer's fast slice: a few hundred hostile requests over every RPC against a writable
server under a memory cap. The long run: ``scripts/fuzz.sh [REQUESTS] [SEED]``."""
from __future__ import annotations

import os
import random
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from torch_geometric.data import Data
from torch_geometric.sampler import NodeSamplerInput

from fuzzing import PROTECTED, run
from gnnstore.client import RemoteNeighborSampler, connect
from gnnstore.ingest.generator import generate_graph
from gnnstore.common.errors import GnnStoreError
from served import ServerProcess, ingest

REQUESTS = int(os.environ.get("GNNSTORE_FUZZ_REQUESTS", "400"))
SEED = int(os.environ.get("GNNSTORE_FUZZ_SEED", "0"))
MEMORY_CAP = 4 << 30


@pytest.fixture(scope="module")
def graph() -> Data:
    return generate_graph(400, 6.0, 16, 3, seed=9)


@pytest.fixture(scope="module")
def server(graph: Data, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    data_dir = ingest(graph, tmp_path_factory.mktemp("fuzz") / "data")
    process = ServerProcess(data_dir, log=data_dir.parent / "server.log")
    group = _cap_memory(process.proc.pid, MEMORY_CAP)
    print(f"server memory cap: {'none (no writable memory cgroup here)' if group is None else group}")
    yield process
    process.stop()
    if group is not None:
        group.rmdir()


def _cap_memory(pid: int, limit: int) -> Path | None:
    """Put ``pid`` in a new memory cgroup of ``limit`` bytes (v1 or v2): an allocation past it
    kills the server, which the fuzzer reports as a crash, instead of starving the machine."""
    for root, limit_file in (("/sys/fs/cgroup/memory", "memory.limit_in_bytes"), ("/sys/fs/cgroup", "memory.max")):
        group = Path(root) / f"gnnstore-fuzz-{pid}"
        if not (Path(root) / "cgroup.procs").is_file():  # not a cgroup hierarchy
            continue
        try:
            group.mkdir(exist_ok=True)
            (group / limit_file).write_text(str(limit))
            (group / "cgroup.procs").write_text(str(pid))
            return group
        except OSError:
            if group.is_dir():
                group.rmdir()
    return None


def test_hostile_requests_never_crash_hang_or_change_the_served_data(server: ServerProcess, graph: Data) -> None:
    fs, _ = connect(server.address, shared_memory=False)
    seeds = NodeSamplerInput(input_id=None, node=torch.arange(0, 400, 7))
    reference = RemoteNeighborSampler(fs, [4, 3], seed=5).sample_from_nodes(seeds)

    def canary() -> bool:
        try:  # a new sampler with the same seed asks for the same first sample of the graph as served
            sampler = RemoteNeighborSampler(fs, [4, 3], seed=5)
            sampler.switch_version(0)  # fuzzed graph writes that were valid made newer versions
            out = sampler.sample_from_nodes(seeds)
            rows = fs.get_tensor(group_name=None, attr_name="x", index=out.node)
        except GnnStoreError:
            return False
        return torch.equal(out.node, reference.node) and torch.equal(rows, graph.x[out.node])

    outcome = run(server.address, lambda: server.proc.poll() is None, canary, random.Random(SEED), REQUESTS)
    print(outcome.summary())
    assert not outcome.crashes, outcome.crashes
    assert not outcome.hangs, outcome.hangs
    assert not outcome.wrong_codes, outcome.wrong_codes
    assert not outcome.canary_failures, outcome.canary_failures
    for attr in PROTECTED:  # writes went to scratch attributes only: the served data is as it was
        stored = fs.get_tensor(group_name=None, attr_name=attr, index=None)
        assert torch.equal(stored, graph[attr]), attr
