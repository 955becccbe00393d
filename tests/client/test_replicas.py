"""Replicas beside a writing primary over one data directory: the primary's writes are served by
every replica within the lag bound, a replica refuses writes and never answers for a version it
has not built, a trainer over all of them gets the batches one server makes, and a replica
whose primary's files are damaged says NOT_SERVING (and balanced trainers leave it), keeps
serving and recovers. A copy made by
``gnnstore snapshot create`` while writes run serves one version, as the primary serves it."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest
import torch
import warm_launcher
from served import ServerProcess, ingest, requests_made, start_server
from torch_geometric.data import Data
from torch_geometric.loader import NodeLoader
from torch_geometric.sampler import NodeSamplerInput

from gnnstore.backend.server.health_probe import probe
from gnnstore.backend.server.server_process import free_port
from gnnstore.client import Connection, GraphWriter, RemoteIdMap, RemoteNeighborSampler, connect, server_info
from gnnstore.common.errors import PreconditionError, ServerUnavailableError

N, E = 300, 2400
MAX_LAG_S = 5.0  # not the default 2 s: on 2 cores shared by a test run's workers, a round can take seconds
SAMPLE = "/gnnstore.v1.GraphService/SampleFromNodes"


@pytest.fixture(scope="module")
def graph() -> Data:
    g = torch.Generator().manual_seed(5)
    return Data(x=torch.randn(N, 8, generator=g), edge_index=torch.randint(0, N, (2, E), generator=g))


@pytest.fixture
def fleet(graph: Data, tmp_path: Path) -> Iterator[list[ServerProcess]]:
    """A primary and two replicas over one fresh data directory."""
    data_dir = ingest(graph, tmp_path / "data")
    servers = [start_server(data_dir, name="primary")]
    try:
        servers += [start_server(data_dir, "--replica", "--max-lag-s", str(MAX_LAG_S), name=f"replica-{i}")
                    for i in range(2)]
        yield servers
    finally:
        for server in servers:
            server.stop()


def until(condition: Callable[[], bool], timeout: float = 30.0) -> float:
    """Seconds until ``condition()`` held (polled); fails after ``timeout``."""
    started = time.monotonic()
    while not condition():
        assert time.monotonic() - started < timeout, "not within the timeout"
        time.sleep(0.02)
    return time.monotonic() - started


def within_bound(replica: ServerProcess, seconds: float) -> bool:
    """The lag contract: a write reaches a replica within the bound, or the replica says it is
    behind (NOT_SERVING, e.g. on a machine too busy to catch up in time)."""
    return seconds <= MAX_LAG_S or "NOT_SERVING" in replica.log.read_text()


def sample(address: str | list[str], version: int, seeds: torch.Tensor, batch_size: int = 50,
           **connection: object) -> list:
    """Every batch of an epoch over ``seeds`` at graph ``version``, request seeds from 11."""
    fs, gs = connect(address, **connection)
    sampler = RemoteNeighborSampler(fs, [5, 3], seed=11, feature_store=fs)
    sampler.switch_version(version)
    loader = NodeLoader((fs, gs), node_sampler=sampler, input_nodes=seeds, batch_size=batch_size)
    batches = [(batch.n_id, batch.edge_index, batch.x) for batch in loader]
    fs.connection.close()
    return batches


def test_the_primarys_writes_are_served_by_every_replica_within_the_lag_bound(fleet: list[ServerProcess]) -> None:
    primary, *replicas = fleet
    pfs, _ = connect(primary.address)
    rows = torch.full((3, 8), 7.0)
    pfs.put_tensor(rows, group_name=None, attr_name="x", index=torch.tensor([4, 5, 6]))
    for replica in replicas:
        rfs, _ = connect(replica.address)
        seen = until(lambda: torch.equal(rfs.get_tensor(group_name=None, attr_name="x", index=torch.tensor([4, 5, 6])),
                                         rows))
        assert within_bound(replica, seen), f"a Put reached {replica.address} after {seen:.2f} s"

    new_rows = torch.randn(2, 8)
    written = GraphWriter(pfs).write(
        nodes={None: [10_001, 10_002]}, rows={None: {"x": new_rows}},
        add_edges={None: (torch.tensor([N, N + 1, 0]), torch.tensor([0, 1, N]))},
    )
    assert written.version == 1 and written.node_ids[None].tolist() == [N, N + 1]
    for replica in replicas:
        rfs, _ = connect(replica.address)
        seen = until(lambda: server_info(rfs.connection).graph_version == 1)
        assert within_bound(replica, seen), f"graph version 1 reached {replica.address} after {seen:.2f} s"
        assert RemoteIdMap(rfs.connection).to_ids(None, [10_001, 10_002]).tolist() == [N, N + 1]
        assert torch.equal(rfs.get_tensor(group_name=None, attr_name="x", index=torch.tensor([N, N + 1])), new_rows)
    seeds = torch.tensor([0, 1, N, N + 1, *range(2, 98)])
    reference = sample(primary.address, 1, seeds)
    for replica in replicas:
        for got, want in zip(sample(replica.address, 1, seeds), reference, strict=True):
            assert all(torch.equal(g, w) for g, w in zip(got, want))


def test_a_replica_refuses_writes_and_never_answers_for_a_version_it_lacks(fleet: list[ServerProcess]) -> None:
    primary, replica, _ = fleet
    rfs, _ = connect(replica.address, retry_timeout=0)
    for write in (
        lambda: rfs.put_tensor(torch.zeros(1, 8), group_name=None, attr_name="x", index=torch.tensor([0])),
        lambda: rfs.remove_tensor(group_name=None, attr_name="x", index=None),
        lambda: GraphWriter(rfs).write(add_edges={None: (torch.tensor([0]), torch.tensor([1]))}),
    ):
        with pytest.raises(PreconditionError, match="this server is a replica: it takes no writes"):
            write()
    sampler = RemoteNeighborSampler(rfs, [2])
    sampler.switch_version(7)
    with pytest.raises(ServerUnavailableError, match=r"graph version 7 is not on this replica yet \(it has 0\.\.0\)"):
        sampler.sample_from_nodes(NodeSamplerInput(input_id=None, node=torch.arange(4)))
    pfs, _ = connect(primary.address)
    assert pfs.get_tensor(group_name=None, attr_name="x", index=torch.tensor([0])).shape == (1, 8)  # untouched


def test_a_trainer_over_the_primary_and_its_replicas_gets_the_batches_one_server_makes(
    fleet: list[ServerProcess],
) -> None:
    primary, *replicas = fleet
    pfs, _ = connect(primary.address)
    GraphWriter(pfs).write(add_edges={None: (torch.arange(0, 50), torch.arange(50, 100))})
    reference = sample(primary.address, 1, torch.arange(N), batch_size=20)
    for replica in replicas:  # each has version 1 and says SERVING, so health-checked balancing uses it
        probe = Connection(replica.address)
        until(lambda: server_info(probe).graph_version == 1 and probe.is_serving())
        probe.close()
    before = [requests_made(s.address, SAMPLE) for s in fleet]
    batches = sample([s.address for s in fleet], 1, torch.arange(N), batch_size=20, retry_timeout=30)
    assert len(batches) == len(reference)
    for got, want in zip(batches, reference):
        assert all(torch.equal(g, w) for g, w in zip(got, want))
    answered = [requests_made(s.address, SAMPLE) - b for s, b in zip(fleet, before)]
    assert all(answered), answered


def test_a_replica_whose_primarys_files_are_damaged_says_not_serving_keeps_serving_and_recovers(
    fleet: list[ServerProcess],
) -> None:
    primary, replica, _ = fleet
    pfs, _ = connect(primary.address)
    rfs, _ = connect(replica.address, retry_timeout=0)
    GraphWriter(pfs).write(add_edges={None: (torch.tensor([1]), torch.tensor([2]))})
    until(lambda: server_info(rfs.connection).graph_version == 1)
    (primary.data_dir / "graph_writes" / "000000000002.npz").write_bytes(b"not a write record")
    until(lambda: "cannot catch up with the primary (MalformedFileError" in replica.log.read_text(), timeout=60)
    until(lambda: not rfs.connection.is_serving(), timeout=60)
    assert server_info(rfs.connection).graph_version == 1  # still answers, from what it has
    assert len(sample(replica.address, 1, torch.arange(50))) == 1
    before = [requests_made(s.address, SAMPLE) for s in (primary, replica)]
    sample([primary.address, replica.address], 1, torch.arange(N))  # balanced, health-checked: no call to it
    assert [requests_made(s.address, SAMPLE) - b for s, b in zip((primary, replica), before)] == [N // 50, 0]
    assert pfs.connection.is_serving()  # the primary is not affected
    GraphWriter(pfs).write(add_edges={None: (torch.tensor([3]), torch.tensor([4]))})  # replaces the damaged file
    until(lambda: rfs.connection.is_serving() and server_info(rfs.connection).graph_version == 2, timeout=60)


def test_a_copy_made_while_writes_run_serves_one_version_as_the_primary_serves_it(
    fleet: list[ServerProcess], tmp_path: Path,
) -> None:
    primary = fleet[0]
    pfs, _ = connect(primary.address)
    writer, stop = GraphWriter(pfs), threading.Event()

    def write_edges() -> None:
        i = 0
        while not stop.is_set():
            writer.write(add_edges={None: (torch.tensor([i % N]), torch.tensor([(7 * i) % N]))})
            i += 1

    writes = threading.Thread(target=write_edges)
    writes.start()
    try:
        until(lambda: server_info(pfs.connection).graph_version >= 3)
        out = tmp_path / "copy"
        no_such_pid = int(Path("/proc/sys/kernel/pid_max").read_text()) + 1
        killed_half_way = tmp_path / f".building-{no_such_pid}-copy-0123abcd"  # a copy SIGKILLed half-way
        still_running = tmp_path / f".building-{os.getpid()}-copy-4567abcd"
        for staging in (killed_half_way, still_running):
            (staging / "features").mkdir(parents=True)
        made = warm_launcher.run([sys.executable, "-m", "gnnstore", "snapshot", "create", "--data-dir",
                                  str(primary.data_dir), str(out)], capture_output=True, text=True, timeout=300)
        assert made.returncode == 0, made.stderr[-3000:]
        version = int(re.search(r"copied graph version (\d+) ", made.stdout).group(1))
        assert version >= 3
        assert not killed_half_way.exists() and still_running.exists()  # swept only when its process is gone
    finally:
        stop.set()
        writes.join()
    assert server_info(pfs.connection).graph_version > version  # the primary went on writing
    with start_server(out, name="copy") as copy:
        assert f"graph version {version} |" in copy.startup_line
        assert server_info(copy.address).graph_version == version
        reference = sample(primary.address, version, torch.arange(N))
        for got, want in zip(sample(copy.address, version, torch.arange(N)), reference, strict=True):
            assert all(torch.equal(g, w) for g, w in zip(got, want))
    again = warm_launcher.run([sys.executable, "-m", "gnnstore", "snapshot", "create", "--data-dir",
                               str(primary.data_dir), str(out)], capture_output=True, text=True, timeout=300)
    assert again.returncode == 2 and f"{out} exists" in again.stderr and "Traceback" not in again.stderr


def health(port: int) -> str:
    """The health status the server on ``port`` answers (or the gRPC code it fails with)."""
    try:
        return probe(str(port), None)
    except grpc.RpcError as exc:
        return exc.code().name


def test_a_replica_started_before_its_primary_waits_on_its_port_not_serving_and_never_writes(
    graph: Data, tmp_path: Path,
) -> None:
    data_dir, port = tmp_path / "data", free_port()
    with futures.ThreadPoolExecutor(1) as pool:
        starting = pool.submit(ServerProcess, data_dir, "--replica", "--max-lag-s", str(MAX_LAG_S),
                               "--port", str(port), log=tmp_path / "replica.log")
        try:
            until(lambda: health(port) == "NOT_SERVING", timeout=60)
            with grpc.insecure_channel(f"127.0.0.1:{port}") as channel, pytest.raises(grpc.RpcError) as refused:
                channel.unary_unary(SAMPLE)(b"", timeout=5)
            assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
            assert "waiting for its primary" in refused.value.details() and str(tmp_path) not in refused.value.details()
            ingest(graph, data_dir)  # no primary has run: no topology snapshot, no feature tier
            until(lambda: "is not built yet: its primary builds it" in (tmp_path / "replica.log").read_text())
            assert health(port) == "NOT_SERVING"
            assert not (data_dir / "snapshots").exists(), "a replica wrote its primary's directory"
            with start_server(data_dir, name="primary") as primary:
                with starting.result(timeout=120) as replica:
                    assert replica.address == f"127.0.0.1:{port}"
                    for got, want in zip(sample(replica.address, 0, torch.arange(N)),
                                         sample(primary.address, 0, torch.arange(N)), strict=True):
                        assert all(torch.equal(g, w) for g, w in zip(got, want))
        finally:
            if not starting.done() or starting.exception() is None:
                starting.result(timeout=120).stop()


def test_a_replica_waiting_for_its_primary_stops_at_once_on_sigterm(tmp_path: Path) -> None:
    port, log = free_port(), tmp_path / "replica.log"
    with open(log, "w") as stderr:
        waiting = warm_launcher.popen(
            [sys.executable, "-m", "gnnstore", "serve", "--replica", "--data-dir", str(tmp_path / "none"),
             "--host", "127.0.0.1", "--port", str(port)], stdout=subprocess.DEVNULL, stderr=stderr,
        )
        try:
            until(lambda: health(port) == "NOT_SERVING", timeout=60)
            waiting.send_signal(signal.SIGTERM)
            assert waiting.wait(timeout=15) == 0
        finally:
            if waiting.poll() is None:
                waiting.kill()
    text = log.read_text()
    assert "does not exist" in text and "stopped while waiting for the primary" in text and "Traceback" not in text
    assert not (tmp_path / "none").exists()
