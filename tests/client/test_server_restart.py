"""Training rides through a server killed with SIGKILL and restarted on the same port and data.

Each case runs one undisturbed epoch, then the same epoch with the server killed after a few
batches and started again a moment later: every seed comes once and every batch equals the
undisturbed one. Then: a server that stays down (a clear error within the budget), one that
comes back with other data (``PreconditionError`` naming both versions), a trainer that is
itself killed and resumes from its checkpoint, and a link loader's epoch resumed in a new
``Prefetcher``.
"""
from __future__ import annotations

import os
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
import torch
import warm_launcher
from served import ServerProcess, ingest
from torch_geometric.data import Data
from torch_geometric.loader import LinkNeighborLoader, NodeLoader
from torch_geometric.sampler import NegativeSampling

from gnnstore.backend.server.server_process import free_port
from gnnstore.client import Prefetcher, RemoteNeighborSampler, client_stats, connect, server_info
from gnnstore.common.errors import PreconditionError, ServerUnavailableError
from gnnstore.ingest.generator import generate_graph

NUM_SEEDS = 600
BATCH_SIZE = 50
ROW_BYTES = 16 * 4


class RestartableServer:
    """``gnnstore serve`` on a fixed port, which a test kills and starts again."""

    def __init__(self, data_dir: Path, port: int) -> None:
        self.data_dir, self.port, self.starts = data_dir, port, 0
        self.process = self.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, data_dir: Path | None = None) -> ServerProcess:
        self.starts += 1
        data_dir = data_dir or self.data_dir
        log = data_dir.parent / f"{data_dir.name}-server-{self.starts}.log"
        self.process = ServerProcess(data_dir, "--port", str(self.port), log=log)
        return self.process

    def kill(self) -> None:
        self.process.proc.kill()
        self.process.stop()  # reaps it and closes its pipes

    def restart_later(self, delay: float, data_dir: Path | None = None) -> threading.Thread:
        """Start the server again ``delay`` seconds from now, on a thread; join it to wait."""
        thread = threading.Thread(target=lambda: (time.sleep(delay), self.start(data_dir)))
        thread.start()
        return thread


@pytest.fixture(scope="module")
def graph() -> Data:
    return generate_graph(3000, 6.0, 16, 4, seed=5)


@pytest.fixture(scope="module")
def server(graph: Data, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RestartableServer]:
    data_dir = ingest(graph, tmp_path_factory.mktemp("restart") / "data")
    server = RestartableServer(data_dir, free_port())
    yield server
    server.process.stop()


def make_loader(server: RestartableServer, cache: bool, num_workers: int, shared_memory: bool,
                retry_timeout: float = 60.0) -> NodeLoader:
    fs, gs = connect(server.address, cache_bytes=300 * ROW_BYTES if cache else 0,
                     shared_memory=shared_memory, retry_timeout=retry_timeout, timeout=10.0)
    sampler = RemoteNeighborSampler(fs, [5, 3], feature_store=fs)  # seeds from torch's generator
    return NodeLoader((fs, gs), node_sampler=sampler, input_nodes=torch.arange(NUM_SEEDS),
                      batch_size=BATCH_SIZE, shuffle=True, num_workers=num_workers)


def epoch(loader: NodeLoader, prefetch: bool, after_batch: int | None = None,
          disturb: object = None) -> list[Data]:
    """One epoch from torch seed 0; ``disturb()`` runs after batch ``after_batch`` is taken."""
    torch.manual_seed(0)
    batches, iterator = [], iter(Prefetcher(loader, depth=2) if prefetch else loader)
    try:
        for i, batch in enumerate(iterator):
            batches.append(batch)
            if i == after_batch:
                disturb()
    except BaseException as error:
        # The traceback's frames hold the iterator: its loader workers would live on until a
        # garbage collection in a later test, where torch's SIGCHLD handler reports a worker's
        # end as that test's error. Cleared, the iterator goes (and its workers) with ``del``.
        traceback.clear_frames(error.__traceback__)
        raise
    finally:
        del iterator
    return batches


def assert_same_epoch(got: list[Data], want: list[Data], graph: Data) -> None:
    seeds = torch.cat([b.n_id[: b.batch_size] for b in got])
    assert torch.equal(seeds.sort().values, torch.arange(NUM_SEEDS))  # every seed exactly once
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert torch.equal(a.n_id, b.n_id) and torch.equal(a.edge_index, b.edge_index)
        assert torch.equal(a.x, graph.x[a.n_id]) and torch.equal(a.y, b.y)


@pytest.mark.parametrize("num_workers", [0, 2])
@pytest.mark.parametrize("cache", [False, True], ids=["no-cache", "cache"])
@pytest.mark.parametrize("prefetch", [False, True], ids=["plain", "prefetcher"])
def test_an_epoch_rides_through_a_server_restart(
    server: RestartableServer, graph: Data, prefetch: bool, cache: bool, num_workers: int
) -> None:
    want = epoch(make_loader(server, cache, num_workers, shared_memory=True), prefetch)
    loader = make_loader(server, cache, num_workers, shared_memory=True)
    restarted: list[threading.Thread] = []

    def kill_and_restart() -> None:
        server.kill()
        restarted.append(server.restart_later(1.0))

    got = epoch(loader, prefetch, after_batch=2, disturb=kill_and_restart)
    restarted[0].join()
    assert_same_epoch(got, want, graph)
    if num_workers == 0:  # the retries happened in this process (else in the workers)
        assert loader.node_sampler.connection.retries > 0
    assert client_stats(server.address)["anonymous"].retries > 0  # the new server saw them come


@pytest.mark.parametrize("prefetch", [False, True], ids=["plain", "prefetcher"])
def test_an_epoch_over_the_socket_with_a_cache_rides_through_a_restart(
    server: RestartableServer, graph: Data, prefetch: bool
) -> None:
    want = epoch(make_loader(server, True, 0, shared_memory=False), prefetch)
    restarted: list[threading.Thread] = []

    def kill_and_restart() -> None:
        server.kill()
        restarted.append(server.restart_later(0.5))

    got = epoch(make_loader(server, True, 0, shared_memory=False), prefetch, 4, kill_and_restart)
    restarted[0].join()
    assert_same_epoch(got, want, graph)


@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_server_that_stays_down_ends_the_epoch_with_a_clear_error_within_the_budget(
    server: RestartableServer, num_workers: int
) -> None:
    loader = make_loader(server, True, num_workers, shared_memory=True, retry_timeout=3.0)
    killed_at: list[float] = []
    children_before = {c.pid for c in psutil.Process().children()}

    def kill() -> None:
        server.kill()
        killed_at.append(time.monotonic())

    try:
        with pytest.raises(ServerUnavailableError, match="retried for 3 s") as caught:
            epoch(loader, prefetch=num_workers == 0, after_batch=1, disturb=kill)
        # the budget, one call's deadline, and a worker's start-up at most
        assert time.monotonic() - killed_at[0] < 3.0 + 10.0 + 10.0
        assert server.address in str(caught.value)
        # the failed epoch's loader workers ended with it (none left for a later test to meet)
        assert {c.pid for c in psutil.Process().children()} <= children_before
    finally:
        server.start()


def test_a_server_back_with_other_data_stops_the_epoch_naming_both_versions(
    server: RestartableServer, tmp_path: Path
) -> None:
    other = ingest(generate_graph(3000, 6.0, 16, 4, seed=6), tmp_path / "other")
    loader = make_loader(server, False, 0, shared_memory=True)
    began_with = server_info(server.address).snapshot_id
    restarted: list[threading.Thread] = []

    def restart_on_other_data() -> None:
        server.kill()
        restarted.append(server.restart_later(0.2, other))

    try:
        with pytest.raises(PreconditionError) as caught:
            epoch(loader, prefetch=False, after_batch=1, disturb=restart_on_other_data)
        restarted[0].join()
        now = server_info(server.address).snapshot_id
        assert now != began_with
        assert began_with in str(caught.value) and now in str(caught.value)
    finally:
        if restarted:
            restarted[0].join()
        server.kill()
        server.start()


TRAINER = """
import os, signal, sys
import torch
from torch_geometric.loader import NodeLoader
from gnnstore.client import Prefetcher, RemoteNeighborSampler, connect

address, folder, crash_after, resume = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
torch.manual_seed(3)
fs, gs = connect(address, cache_bytes=300 * 64)
sampler = RemoteNeighborSampler(fs, [5, 3], feature_store=fs)
loader = NodeLoader((fs, gs), node_sampler=sampler, input_nodes=torch.arange(600), batch_size=50,
                    shuffle=True)
pf = Prefetcher(loader, depth=3)
position = 0
if resume != "-":
    checkpoint = torch.load(resume)
    pf.load_state_dict(checkpoint["loader"])
    position = checkpoint["loader"]["position"]
for batch in pf:
    torch.rand(100)  # the model's own draws
    saved = {"loader": pf.state_dict(), "n_id": batch.n_id, "seeds": batch.n_id[:batch.batch_size]}
    torch.save(saved, f"{folder}/tmp")
    os.replace(f"{folder}/tmp", f"{folder}/batch-{position:03d}.pt")  # the checkpoint, atomically
    position += 1
    if position == crash_after:
        os.kill(os.getpid(), signal.SIGKILL)
"""


def train(address: str, folder: Path, crash_after: int, resume: Path | None = None) -> list[dict]:
    folder.mkdir()
    result = warm_launcher.run(
        [sys.executable, "-c", TRAINER, address, str(folder), str(crash_after), str(resume or "-")],
        capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == (-9 if crash_after > 0 else 0), result.stderr
    return [torch.load(path) for path in sorted(folder.glob("batch-*.pt"))]


def test_a_trainer_killed_mid_epoch_resumes_from_its_checkpoint(
    server: RestartableServer, tmp_path: Path
) -> None:
    whole = train(server.address, tmp_path / "whole", crash_after=0)
    first = train(server.address, tmp_path / "first", crash_after=5)
    assert len(first) == 5
    second = train(server.address, tmp_path / "second", 0, resume=tmp_path / "first" / "batch-004.pt")
    assert len(whole) == NUM_SEEDS // BATCH_SIZE and len(first) + len(second) == len(whole)
    seeds = torch.cat([b["seeds"] for b in first + second])
    assert torch.equal(seeds.sort().values, torch.arange(NUM_SEEDS))  # the union, no duplicates
    for got, want in zip(first + second, whole):
        assert torch.equal(got["n_id"], want["n_id"])  # the batches of the undisturbed run
    assert whole[-1]["loader"]["position"] == len(whole)  # resuming there makes no batch
    assert os.path.exists(tmp_path / "second" / "batch-006.pt")  # numbered from where it resumed


def test_a_link_loader_epoch_resumes_from_its_state_in_a_new_prefetcher(
    server: RestartableServer, graph: Data
) -> None:
    def link_loader() -> LinkNeighborLoader:
        fs, gs = connect(server.address, cache_bytes=300 * ROW_BYTES)
        sampler = RemoteNeighborSampler(fs, [4, 2], feature_store=fs)
        return LinkNeighborLoader((fs, gs), num_neighbors=[4, 2], neighbor_sampler=sampler,
                                  edge_label_index=(None, graph.edge_index[:, :400]), batch_size=40,
                                  shuffle=True, neg_sampling=NegativeSampling("binary", 1))

    torch.manual_seed(1)
    whole = list(Prefetcher(link_loader(), depth=2))
    torch.manual_seed(1)
    first = Prefetcher(link_loader(), depth=2)
    taken = [batch for _, batch in zip(range(4), first)]
    state = first.state_dict()
    first.close()
    torch.manual_seed(99)  # the new process's generator is elsewhere: the state says where to be
    second = Prefetcher(link_loader(), depth=3)
    second.load_state_dict(state)
    rest = list(second)
    assert len(taken) + len(rest) == len(whole) == 10
    for got, want in zip(taken + rest, whole):
        assert torch.equal(got.n_id, want.n_id) and torch.equal(got.edge_label_index, want.edge_label_index)
        assert torch.equal(got.edge_label, want.edge_label) and torch.equal(got.x, graph.x[got.n_id])
    assert second.state_dict() == {}  # the epoch is over: the next iter() begins a new one
