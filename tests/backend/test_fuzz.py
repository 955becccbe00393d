"""The fuzzer's fast slice: a few hundred hostile requests over every RPC, and hostile frames on
the data port and the metrics endpoint, against a writable server under a memory cap. The long
run: ``scripts/fuzz.sh [REQUESTS] [SEED]``."""
from __future__ import annotations

import os
import random
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from fuzzing import PROTECTED, data_port_frames, http_requests, run, send_data_port_frame, send_http_request
from prometheus_client.parser import text_string_to_metric_families
from served import ServerProcess, ingest
from torch_geometric.data import Data
from torch_geometric.sampler import NodeSamplerInput

from gnnstore.backend.server.server_process import free_port
from gnnstore.client import RemoteNeighborSampler, connect
from gnnstore.common.errors import GnnStoreError
from gnnstore.ingest.generator import generate_graph

REQUESTS = int(os.environ.get("GNNSTORE_FUZZ_REQUESTS", "400"))
SEED = int(os.environ.get("GNNSTORE_FUZZ_SEED", "0"))
MEMORY_CAP = 4 << 30


@pytest.fixture(scope="module")
def graph() -> Data:
    return generate_graph(400, 6.0, 16, 3, seed=9)


@pytest.fixture(scope="module")
def ports() -> tuple[int, int]:
    """The server's data port and metrics port."""
    return free_port(), free_port()


@pytest.fixture(scope="module")
def server(graph: Data, ports: tuple[int, int], tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    data_dir = ingest(graph, tmp_path_factory.mktemp("fuzz") / "data")
    data_port, metrics_port = ports
    process = ServerProcess(data_dir, "--data-port", str(data_port), "--metrics-port", str(metrics_port),
                            log=data_dir.parent / "server.log")
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


def test_strangers_frames_on_the_data_port_never_read_a_payload_nor_stop_it(
    server: ServerProcess, ports: tuple[int, int]
) -> None:
    data_port, metrics_port = ports
    seen = Counter()
    for i, frame in enumerate(data_port_frames(random.Random(SEED), REQUESTS // 2)):
        answer = send_data_port_frame(data_port, frame, timeout=20)
        seen[answer] += 1
        assert answer in ("unknown", "closed"), f"frame #{i} ({len(frame)} bytes): {answer}"
        assert server.proc.poll() is None, f"frame #{i} ({len(frame)} bytes) stopped the server"
    print(f"data port answers: {dict(seen)}")
    assert seen["unknown"] > 0  # whole tickets were read and refused, not just cut
    assert send_data_port_frame(data_port, bytes(16), timeout=20) == "unknown"  # still answering
    assert _gauge(metrics_port, "gnnstore_data_port_connections") == 0  # every connection was let go


def test_hostile_http_gets_an_error_or_nothing_and_only_a_scrape_gets_the_metrics(
    server: ServerProcess, ports: tuple[int, int]
) -> None:
    _, metrics_port = ports
    seen = Counter()
    for i, (request, scrape) in enumerate(http_requests(random.Random(SEED), REQUESTS // 2)):
        status = send_http_request(metrics_port, request, timeout=20)
        seen[status] += 1
        what = f"request #{i} ({len(request)} bytes, {request[:40]!r})"
        assert status != -1, f"{what} hung"
        assert (status == 200) == scrape, f"{what}: {status}"
        assert status in (None, 200, 400, 404, 414, 431, 501, 505), f"{what}: {status}"
        assert server.proc.poll() is None, f"{what} stopped the server"
    print(f"metrics endpoint statuses: {dict(seen)}")
    assert seen[200] > 0 and seen[404] > 0
    assert _gauge(metrics_port, "gnnstore_uptime_seconds") > 0


def _gauge(port: int, name: str) -> float:
    """One unlabelled series of a scrape of the metrics endpoint."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    return next(s.value for f in text_string_to_metric_families(text) for s in f.samples if s.name == name)
