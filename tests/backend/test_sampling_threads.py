"""Sampling calls run on the server's few sampling threads: same answers, bounded, ended on stop."""
from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch
from served import ingest
from torch_geometric.sampler import NodeSamplerInput, SamplerOutput

from gnnstore.backend.server.server import GnnStoreServer, sampling_threads
from gnnstore.client import RemoteNeighborSampler
from gnnstore.config import ServerConfig
from gnnstore.ingest.generator import generate_graph

CALLS = 12


def _sample(sampler: RemoteNeighborSampler, seed: int) -> SamplerOutput:
    seeds = torch.arange(seed % 7, 200, 7)
    return sampler.sample_nodes(NodeSamplerInput(input_id=torch.arange(seeds.numel()), node=seeds), seed=seed)


def _sampling_thread_names(prefix: str = "gnnstore-sample") -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith(prefix)]


def test_concurrent_calls_of_one_client_share_its_sampling_thread_and_answer_as_serial_ones(tmp_path: Path) -> None:
    data_dir = ingest(generate_graph(300, 10.0, 8, 3, seed=1), tmp_path / "data")
    server = GnnStoreServer(ServerConfig(data_dir=data_dir, port=0, read_only=True, sampling_threads=1))
    address = server.start()
    try:
        sampler = RemoteNeighborSampler(address, [5, 3])
        serial = [_sample(sampler, seed) for seed in range(CALLS)]
        with ThreadPoolExecutor(6) as callers:
            concurrent = list(callers.map(lambda seed: _sample(sampler, seed), range(CALLS)))
        for one, other in zip(serial, concurrent):
            assert torch.equal(one.node, other.node)
            assert torch.equal(one.row, other.row) and torch.equal(one.col, other.col)
        assert _sampling_thread_names() == ["gnnstore-sample-0", "gnnstore-sample-1"]  # one client's, one spare
    finally:
        server.stop(grace=5.0)
    assert _sampling_thread_names() == [] == _sampling_thread_names("gnnstore-bulk")  # stop ends them


def test_sampling_threads_default_to_half_the_usable_cpus() -> None:
    assert sampling_threads(ServerConfig(sampling_threads=3)) == 3
    assert sampling_threads(ServerConfig()) == max(1, len(os.sched_getaffinity(0)) // 2)


def test_negative_sampling_threads_are_refused() -> None:
    with pytest.raises(ValueError, match="sampling_threads must be >= 0, got -1"):
        ServerConfig(sampling_threads=-1)


def test_a_server_that_cannot_listen_leaves_no_threads_behind(tmp_path: Path) -> None:
    from gnnstore.common.errors import PreconditionError

    data_dir = ingest(generate_graph(100, 4.0, 4, 2, seed=1), tmp_path / "data")
    first = GnnStoreServer(ServerConfig(data_dir=data_dir, port=0, read_only=True))
    port = int(first.start().rsplit(":", 1)[1])
    try:
        before = _sampling_thread_names()
        second = GnnStoreServer(ServerConfig(data_dir=data_dir, port=port, read_only=True))
        with pytest.raises(PreconditionError, match=f"cannot listen on 127.0.0.1:{port}"):
            second.start()
        assert _sampling_thread_names() == before and second.data is None
    finally:
        first.stop(grace=1.0)


def _cpu_ns(prefix: str) -> int:
    """CPU time so far of this process's threads whose name starts with ``prefix``."""
    total = 0
    for thread in threading.enumerate():
        if thread.name.startswith(prefix):
            with open(f"/proc/self/task/{thread.native_id}/schedstat") as stat:
                total += int(stat.read().split()[0])
    return total


def _settled_cpu_ns(prefix: str) -> int:
    """``_cpu_ns(prefix)`` once two readings 50 ms apart agree: threads just started may still
    be on their way to their first wait (a loaded machine delays them)."""
    reading = _cpu_ns(prefix)
    for _ in range(100):
        time.sleep(0.05)
        reading, previous = _cpu_ns(prefix), reading
        if reading == previous:
            return reading
    raise AssertionError(f"threads {prefix}-* kept using CPU with no request to run")


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads threads' CPU time from /proc")
def test_requests_over_the_bulk_bound_run_on_the_bulk_threads_and_answer_the_same(tmp_path: Path) -> None:
    data_dir = ingest(generate_graph(300, 10.0, 8, 3, seed=1), tmp_path / "data")
    answers = []
    # [5, 3] from 28 or 29 seeds is bounded by 29 * 5 + 145 * 3 = 580 edges at most, 560 at least
    runs = ((10_000, "gnnstore-sample", "gnnstore-bulk"), (100, "gnnstore-bulk", "gnnstore-sample"))
    for bulk_edges, busy, idle in runs:
        server = GnnStoreServer(ServerConfig(data_dir=data_dir, port=0, read_only=True, bulk_sample_edges=bulk_edges))
        address = server.start()
        try:
            sampler = RemoteNeighborSampler(address, [5, 3])
            before = _cpu_ns(busy), _settled_cpu_ns(idle)
            answers.append([_sample(sampler, seed) for seed in range(CALLS)])
            assert _cpu_ns(busy) > before[0] and _cpu_ns(idle) == before[1], (busy, idle)
        finally:
            server.stop(grace=5.0)
    for one, other in zip(*answers):
        assert torch.equal(one.node, other.node) and torch.equal(one.row, other.row)
