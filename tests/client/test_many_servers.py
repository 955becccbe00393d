"""One trainer, several servers of one graph: two ``--read-only`` servers over one data directory
reached as one connection. Calls go round robin over both, a batch is the same whichever server
makes it, and a server killed mid-epoch costs a retry, not a batch."""
from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest
import torch
from certificates import make_pki
from served import ServerProcess, ingest, requests_made, serve_graph, start_server
from torch_geometric.data import Data
from torch_geometric.loader import NodeLoader
from torch_geometric.sampler import NodeSamplerInput

from gnnstore.client import Prefetcher, RemoteNeighborSampler, connect
from gnnstore.common.errors import InvalidRequestError, PreconditionError, ServerUnavailableError
from gnnstore.ingest.generator import generate_graph

SAMPLE = "/gnnstore.v1.GraphService/SampleFromNodes"
NODES, BATCH = 3000, 100


@pytest.fixture(scope="module")
def graph() -> Data:
    """Big enough that some batches' payloads go through the data ports (shared memory is off)."""
    return generate_graph(NODES, 10.0, 96, 4, seed=2)


@pytest.fixture(scope="module")
def data_dir(graph: Data, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return ingest(graph, tmp_path_factory.mktemp("many") / "data")


@pytest.fixture(scope="module")
def servers(data_dir: Path) -> Iterator[list[ServerProcess]]:
    servers = [start_server(data_dir, "--read-only", name=f"server-{i}") for i in range(2)]
    yield servers
    for server in servers:
        server.stop()


def epoch(
    address: str | list[str], *, shared_memory: bool = False, prefetch: bool = False,
    after_batch: Callable[[int], None] = lambda i: None,
) -> tuple[list, list[float]]:
    """Every batch of one epoch (n_id, edge_index, x) and how long each took to arrive;
    ``prefetch``: through a ``Prefetcher`` (3 batches in flight; its seeds from torch's seed 0)."""
    fs, gs = connect(address, shared_memory=shared_memory, retry_timeout=30)
    sampler = RemoteNeighborSampler(fs, [10, 5], seed=11, feature_store=fs)
    loader = NodeLoader((fs, gs), node_sampler=sampler, input_nodes=torch.arange(NODES), batch_size=BATCH)
    if prefetch:
        torch.manual_seed(0)
        loader = Prefetcher(loader, depth=3)
    batches, waits, last = [], [], time.monotonic()
    for i, batch in enumerate(loader):
        waits.append(time.monotonic() - last)
        batches.append((batch.n_id, batch.edge_index, batch.x))
        after_batch(i)
        last = time.monotonic()
    fs.connection.close()
    return batches, waits


def assert_same(batches: list, reference: list) -> None:
    assert len(batches) == len(reference)
    for i, (got, want) in enumerate(zip(batches, reference)):
        assert all(torch.equal(g, w) for g, w in zip(got, want)), f"batch {i} differs"


@pytest.mark.parametrize("shared_memory", [False, True], ids=["data-port", "shared-memory"])
def test_calls_spread_over_every_server_and_each_batch_is_the_one_server_makes(
    servers: list[ServerProcess], graph: Data, shared_memory: bool
) -> None:
    reference, _ = epoch(servers[0].address)
    before = [requests_made(s.address, SAMPLE) for s in servers]
    batches, _ = epoch([s.address for s in servers], shared_memory=shared_memory)
    answered = [requests_made(s.address, SAMPLE) - b for s, b in zip(servers, before)]
    print(f"sampling calls answered by each server: {answered}")
    assert sum(answered) == len(reference) and min(answered) >= len(reference) // 4, answered
    assert_same(batches, reference)
    for n_id, _, x in batches:
        assert torch.equal(x, graph.x[n_id])


@pytest.mark.parametrize("prefetch", [False, True], ids=["plain", "prefetch"])
def test_a_server_killed_mid_epoch_costs_a_retry_not_a_batch_and_is_called_again_once_back(
    servers: list[ServerProcess], data_dir: Path, prefetch: bool
) -> None:
    reference, _ = epoch(servers[0].address, prefetch=prefetch)
    victim = servers[1]
    port = victim.address.rpartition(":")[2]
    killed_at: list[float] = []

    def kill(i: int) -> None:
        if i == 5:
            victim.proc.send_signal(signal.SIGKILL)
            victim.proc.wait()
            killed_at.append(time.monotonic())

    batches, waits = epoch([s.address for s in servers], prefetch=prefetch, after_batch=kill)
    assert killed_at, "the epoch ended before the kill"
    assert_same(batches, reference)  # every seed once, every batch as undisturbed
    longest = max(waits[6:])
    print(f"longest wait for a batch after the kill: {longest:.3f} s (median before: {sorted(waits[1:6])[2]:.3f} s)")
    assert longest < 10.0

    victim.stop()
    servers[1] = start_server(data_dir, "--read-only", "--port", port, name="server-back")
    before = requests_made(servers[1].address, SAMPLE)
    batches, _ = epoch([s.address for s in servers], prefetch=prefetch)
    assert_same(batches, reference)
    assert requests_made(servers[1].address, SAMPLE) > before, "the server back on its port got no call"


def test_no_servers_a_malformed_one_or_servers_of_different_graphs_are_refused_at_connect(
    servers: list[ServerProcess], tmp_path: Path
) -> None:
    with pytest.raises(InvalidRequestError, match="at least one server"):
        connect([])
    with pytest.raises(InvalidRequestError, match="'nonsense'"):
        connect([servers[0].address, "nonsense"])
    with pytest.raises(InvalidRequestError, match="host:port"):
        connect("dns:///no-port-here")
    other = serve_graph(generate_graph(50, 3.0, 4, 2, seed=1), tmp_path, "--read-only")
    try:
        with pytest.raises(PreconditionError, match="different graphs") as refused:
            connect([servers[0].address, other.address])
        assert servers[0].address in str(refused.value) and other.address in str(refused.value)
    finally:
        other.stop()


def test_an_aged_connection_is_replaced_without_failing_a_call(data_dir: Path) -> None:
    server = start_server(data_dir, "--read-only", "--max-connection-age-s", "1", name="aging")
    try:
        fs, gs = connect(server.address, shared_memory=False)
        sampler = RemoteNeighborSampler(fs, [5], seed=1)
        port, local_ports = int(server.address.rpartition(":")[2]), set()
        until = time.monotonic() + 4
        while time.monotonic() < until:  # every call answers while connections are aged out under it
            sampler.sample_from_nodes(NodeSamplerInput(None, torch.arange(10)))
            local_ports |= {c.laddr.port for c in psutil.Process().net_connections("tcp")
                            if c.raddr and c.raddr.port == port and c.status == psutil.CONN_ESTABLISHED}
            time.sleep(0.05)
        assert len(local_ports) >= 2, f"one connection for 4 s under a 1 s age: {local_ports}"
        assert fs.connection.retries == 0
        fs.connection.close()
    finally:
        server.stop()


def test_over_tls_every_server_is_checked_against_the_name_the_trainer_uses(
    servers: list[ServerProcess], data_dir: Path, tmp_path: Path
) -> None:
    pki = make_pki(tmp_path / "pki")  # the servers' certificate names localhost and 127.0.0.1
    tls = ["--tls-cert", str(pki.server_cert), "--tls-key", str(pki.server_key)]
    secure = [start_server(data_dir, "--read-only", *tls, name=f"tls-{i}") for i in range(2)]
    try:
        named = [f"localhost:{s.address.rpartition(':')[2]}" for s in secure]
        before = [requests_made(s.address, SAMPLE, tls=pki.ca) for s in secure]
        fs, gs = connect(named, tls=pki.ca, shared_memory=False)
        sampler = RemoteNeighborSampler(fs, [10, 5], seed=11, feature_store=fs)
        loader = NodeLoader((fs, gs), node_sampler=sampler, input_nodes=torch.arange(NODES), batch_size=BATCH)
        assert_same([(b.n_id, b.edge_index, b.x) for b in loader], epoch(servers[0].address)[0])
        assert fs.connection.data_port().fetched > 0  # large replies came through both TLS data ports
        assert all(requests_made(s.address, SAMPLE, tls=pki.ca) > b for s, b in zip(secure, before))
        with pytest.raises(ServerUnavailableError, match="TLS"):  # a CA that signed neither
            connect(named, tls=pki.other_ca)
    finally:
        for server in secure:
            server.stop()


def test_a_dns_name_reaches_the_server_behind_it(servers: list[ServerProcess], graph: Data) -> None:
    port = servers[0].address.rpartition(":")[2]
    fs, _ = connect(f"dns:///localhost:{port}")  # what a headless Service name is, with one address
    assert fs.connection.target.balanced and fs.connection.data_port() is None  # a name: no one host
    out = RemoteNeighborSampler(fs, [5], seed=1, feature_store=fs).sample_from_nodes(
        NodeSamplerInput(None, torch.arange(10)))
    assert torch.equal(fs.get_tensor(group_name=None, attr_name="x", index=out.node), graph.x[out.node])
    fs.connection.close()
