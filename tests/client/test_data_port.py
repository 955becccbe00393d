"""Sampling replies through the server's data port, as a trainer on another host receives them.

Real servers on 127.0.0.1 with shared memory off (what another host gets): batches read from the
data port equal those through gRPC, and a port that cannot be reached, a ticket already gone or a
server without the data plane all still give exact batches.
"""
from __future__ import annotations

import logging
import secrets
import signal
import socket
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from certificates import make_pki
from prometheus_client.parser import text_string_to_metric_families
from served import ServerProcess, ingest, serve_graph, start_server
from torch_geometric.data import Data
from torch_geometric.loader import NodeLoader
from torch_geometric.sampler import NodeSamplerInput

from gnnstore.backend.server.server_process import free_port
from gnnstore.client import Prefetcher, RemoteNeighborSampler, connect, server_stats
from gnnstore.client.channel import Connection
from gnnstore.client.data_port import DataPortClient, client_tls
from gnnstore.client.remote_feature_store import RemoteFeatureStore
from gnnstore.client.sampler_wire import node_input_to_proto
from gnnstore.common.errors import ServerUnavailableError
from gnnstore.ingest.generator import generate_graph
from gnnstore.proto import graph_pb2
from gnnstore.proto.sampling_options import options_to_proto

SAMPLE = "/gnnstore.v1.GraphService/SampleFromNodes"
KEYS = ("n_id", "edge_index", "e_id", "x", "y", "train_mask")


@pytest.fixture(scope="module")
def graph() -> Data:
    """Big enough that a batch's payload (~0.5 MB) goes through the data port."""
    return generate_graph(3000, 10.0, 96, 4, seed=2)


METRICS_PORT = free_port()


@pytest.fixture(scope="module")
def server(graph: Data, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    server = serve_graph(graph, tmp_path_factory.mktemp("data-port"), "--read-only",
                         "--metrics-port", str(METRICS_PORT))
    yield server
    server.stop()


def gauge(name: str) -> float:
    text = urllib.request.urlopen(f"http://127.0.0.1:{METRICS_PORT}/metrics", timeout=10).read().decode()
    (family,) = [f for f in text_string_to_metric_families(text) if f.name == name]
    return family.samples[0].value


def epoch(
    address: str, *, use_data_port: bool = True, prefetch: int = 0, **connection: object
) -> tuple[list[Data], Connection]:
    fs, gs = connect(address, shared_memory=False, use_data_port=use_data_port, **connection)
    sampler = RemoteNeighborSampler(fs, [10, 5], feature_store=fs, seed=4)
    loader = NodeLoader((fs, gs), node_sampler=sampler, input_nodes=torch.arange(1200), batch_size=300)
    return list(Prefetcher(loader, depth=prefetch) if prefetch else loader), fs.connection


def assert_same(batches: list[Data], truth: list[Data], graph: Data) -> None:
    assert len(batches) == len(truth) == 4
    for a, b in zip(batches, truth, strict=True):
        for key in KEYS:
            assert torch.equal(a[key], b[key]), key
        assert torch.equal(a.x, graph.x[a.n_id])


def test_batches_through_the_data_port_equal_those_through_grpc(server: ServerProcess, graph: Data) -> None:
    sent_before = server_stats(server.address)[SAMPLE].bytes_sent if SAMPLE in server_stats(server.address) else 0
    via_port, connection = epoch(server.address, prefetch=3)
    sent_port = server_stats(server.address)[SAMPLE].bytes_sent - sent_before
    via_grpc, plain = epoch(server.address, use_data_port=False)
    sent_grpc = server_stats(server.address)[SAMPLE].bytes_sent - sent_before - sent_port
    assert connection.data_port().fetched == 4, "every batch's payload came from the data port"
    assert plain.data_port() is None
    assert gauge("gnnstore_data_port_held_bytes") == 0, "every payload was read"
    assert 1 <= gauge("gnnstore_data_port_connections") <= 4, "the client keeps its connections for the next epoch"
    connection.close()
    deadline = time.monotonic() + 10
    while gauge("gnnstore_data_port_connections") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert gauge("gnnstore_data_port_connections") == 0, "a closed client's connections are gone"
    assert_same(via_port, via_grpc, graph)
    # Stats count a payload handed to the data port as sent: the two epochs moved the same bytes.
    assert abs(sent_port - sent_grpc) < 0.01 * sent_grpc
    assert sent_grpc > 4 * 300 * 96 * 4


def test_an_unreachable_data_port_warns_once_and_the_replies_come_through_grpc(
    graph: Data, server: ServerProcess, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    nowhere = free_port()  # the server tells clients a port nobody listens on
    misconfigured = serve_graph(graph, tmp_path, "--read-only", "--data-public-port", str(nowhere))
    try:
        with caplog.at_level(logging.WARNING, logger="gnnstore.client.channel"):
            batches, connection = epoch(misconfigured.address)
        warned = [r.getMessage() for r in caplog.records if "data port" in r.getMessage()]
        assert len(warned) == 1 and f"127.0.0.1:{nowhere}" in warned[0] and "--data-public-port" in warned[0]
        assert connection.use_data_port is False
        assert_same(batches, epoch(server.address, use_data_port=False)[0], graph)
    finally:
        misconfigured.stop()


def test_a_payload_gone_from_the_data_port_is_asked_for_again_through_grpc(
    server: ServerProcess, graph: Data, monkeypatch: pytest.MonkeyPatch
) -> None:
    fetch = Connection.fetch_payload
    thief = DataPortClient("127.0.0.1", None)

    def read_by_another_first(self: Connection, ticket: object, timeout: float | None = None) -> memoryview | None:
        thief.fetch(ticket, timeout=5)  # the ticket is spent, as if it had expired
        return fetch(self, ticket, timeout)

    monkeypatch.setattr(Connection, "fetch_payload", read_by_another_first)
    before = server_stats(server.address)
    requests_before = before[SAMPLE].requests if SAMPLE in before else 0  # none yet when this test runs first
    batches, connection = epoch(server.address)
    assert thief.fetched == 4 and connection.data_port().fetched == 0
    assert server_stats(server.address)[SAMPLE].requests - requests_before == 8, "each batch asked twice"
    assert connection.use_data_port, "a spent ticket does not turn the data port off"
    monkeypatch.undo()
    assert_same(batches, epoch(server.address, use_data_port=False)[0], graph)
    thief.close()


def test_a_server_without_the_data_port_answers_through_grpc(
    graph: Data, server: ServerProcess, tmp_path: Path
) -> None:
    without = serve_graph(graph, tmp_path, "--read-only", "--no-serve-data-port")
    try:
        batches, connection = epoch(without.address)
        assert connection.data_port().fetched == 0
        assert_same(batches, epoch(server.address, use_data_port=False)[0], graph)
    finally:
        without.stop()


@pytest.mark.parametrize("mutual", [False, True], ids=["tls", "mutual-tls"])
def test_over_tls_the_data_port_speaks_tls_and_a_plaintext_reader_gets_nothing(
    graph: Data, server: ServerProcess, tmp_path: Path, mutual: bool
) -> None:
    pki = make_pki(tmp_path / "pki")
    token = secrets.token_urlsafe(24)
    tls = ["--tls-cert", str(pki.server_cert), "--tls-key", str(pki.server_key)]
    client: dict[str, object] = {"tls": pki.ca, "token": token}
    if mutual:
        tls += ["--tls-client-ca", str(pki.ca)]
        client.update(client_cert=pki.client_cert, client_key=pki.client_key)
    secure = start_server(ingest(graph, tmp_path / "data"), "--read-only", *tls,
                          env={"GNNSTORE_AUTH_TOKENS": f"{token} reader"}, name="tls")
    try:
        batches, connection = epoch(secure.address, **client)
        assert connection.data_port().fetched == 4
        assert_same(batches, epoch(server.address, use_data_port=False)[0], graph)
        # A reply's ticket sent in plaintext to the TLS port: the handshake fails, nothing is
        # sent back, and the ticket is still good for the TLS reader it was issued to.
        request = node_input_to_proto(NodeSamplerInput(input_id=None, node=torch.arange(300)))
        request.options.CopyFrom(options_to_proto([10, 5], replace=False, disjoint=False, seed=1))
        request.features.CopyFrom(RemoteFeatureStore(connection).exchange.request([(None, "x")], 0))
        request.accept_payload = request.accept_data_port = True
        ticket = connection.call("GraphService", "SampleFromNodes", request).message.data_port_ticket
        assert ticket.size > 0
        with socket.create_connection(("127.0.0.1", ticket.port), timeout=10) as plain:
            plain.sendall(ticket.ticket)
            try:
                answer = plain.recv(1 << 16)
            except ConnectionResetError:
                answer = b""
            assert answer == b"" or (answer[0] == 0x15 and len(answer) < 16), "closed, or a TLS alert alone"
        if mutual:  # TLS without a client certificate: refused as on the gRPC port
            with pytest.raises(ServerUnavailableError):
                DataPortClient("127.0.0.1", client_tls(pki.ca.read_bytes())).fetch(ticket, timeout=10)
        assert len(connection.fetch_payload(ticket)) == ticket.size
    finally:
        secure.stop()


def test_an_epoch_through_the_data_port_rides_through_a_server_restart(graph: Data, tmp_path: Path) -> None:
    """Killed mid-epoch with fetches in flight, back on the same gRPC port and a new data port:
    every batch equals the undisturbed epoch's, and the data port is used again after."""
    data_dir, port = ingest(graph, tmp_path / "data"), free_port()
    started = [start_server(data_dir, "--read-only", "--port", str(port), name="first")]
    try:
        want, _ = epoch(started[0].address, prefetch=2)
        fs, gs = connect(started[0].address, shared_memory=False, timeout=10.0)
        sampler = RemoteNeighborSampler(fs, [10, 5], feature_store=fs, seed=4)
        loader = NodeLoader((fs, gs), node_sampler=sampler, input_nodes=torch.arange(1200), batch_size=300)
        got = []
        for i, batch in enumerate(Prefetcher(loader, depth=2)):
            got.append(batch)
            if i == 0:
                started[0].proc.kill()
                started[0].stop()
                time.sleep(0.5)
                started.append(start_server(data_dir, "--read-only", "--port", str(port), name="second"))
        assert_same(got, want, graph)
        assert fs.connection.use_data_port, "a port that worked before is not given up on"
        fetched = fs.connection.data_port().fetched
        assert fetched >= 1 and fs.connection.retries > 0
        again, _ = epoch(started[-1].address)
        assert_same(again, want, graph)
    finally:
        for server in started:
            server.stop()


def test_a_data_port_that_worked_before_is_tried_again_one_never_reached_is_not(server: ServerProcess) -> None:
    closed = graph_pb2.DataPortTicket(ticket=bytes(16), port=free_port(), size=10)  # nobody listens there
    _, worked = epoch(server.address)
    assert worked.data_port().fetched == 4
    assert worked.fetch_payload(closed) is None and worked.use_data_port, "the server may be restarting"
    fresh = connect(server.address, shared_memory=False)[0].connection
    assert fresh.fetch_payload(closed) is None and not fresh.use_data_port, "a firewall: gRPC from now on"


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_loader_workers_read_from_the_data_port_themselves(server: ServerProcess, graph: Data, context: str) -> None:
    fs, gs = connect(server.address, shared_memory=False)
    sampler = RemoteNeighborSampler(fs, [10, 5], feature_store=fs, seed=4)
    loader = NodeLoader((fs, gs), node_sampler=sampler, input_nodes=torch.arange(1200), batch_size=300,
                        num_workers=2, multiprocessing_context=context)
    batches, connections = [], []
    for batch in loader:
        batches.append(batch)
        connections.append(gauge("gnnstore_data_port_connections"))
    assert fs.connection.data_port().fetched == 0, "the trainer process itself read no payload"
    assert max(connections) >= 1, "the workers' own connections"
    seeds = torch.cat([b.n_id[: b.batch_size] for b in batches])
    assert torch.equal(seeds.sort().values, torch.arange(1200))
    for batch in batches:  # workers seed their own calls: right rows, not the same sample as in-process
        assert torch.equal(batch.x, graph.x[batch.n_id]) and torch.equal(batch.y, graph.y[batch.n_id])


def test_a_refused_segment_sends_the_large_reply_through_the_data_port(server: ServerProcess, graph: Data) -> None:
    """A trainer on the server's host but not in its container offers a segment the server
    cannot open: that reply comes through the data port too, not inside gRPC."""
    from gnnstore.proto.reply_segment import ReplySegment

    fs, gs = connect(server.address, shared_memory=True)
    pool = fs.connection.reply_segments()
    wrong = ReplySegment(1 << 24)
    wrong.message.nonce = bytes(16)  # the server checks it and refuses the segment
    pool._free.append(wrong)  # the next call offers this one
    sampler = RemoteNeighborSampler(fs, [10, 5], feature_store=fs, seed=4)
    loader = NodeLoader((fs, gs), node_sampler=sampler, input_nodes=torch.arange(1200), batch_size=300)
    batches = list(loader)
    assert pool.refused is not None and "nonce" in pool.refused
    assert fs.connection.data_port().fetched == 4, "the refused call's reply as well"
    assert_same(batches, epoch(server.address, use_data_port=False)[0], graph)


def test_a_full_data_port_leaves_each_batch_in_one_grpc_reply_and_says_so(
    graph: Data, server: ServerProcess, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Strangers' idle connections used to fill the port: a trainer holding none then had every
    batch sampled twice (a ticket it could not read, then the same request through gRPC)."""
    data_port, metrics_port = free_port(), free_port()
    full = serve_graph(graph, tmp_path, "--read-only", "--data-port", str(data_port),
                       "--metrics-port", str(metrics_port))
    strangers = []
    try:
        for host in ("127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"):  # 64 each: a quarter is one host's share
            strangers += [socket.create_connection(("127.0.0.1", data_port), timeout=5, source_address=(host, 0))
                          for _ in range(64)]
        text = ""
        deadline = time.monotonic() + 10
        while "gnnstore_data_port_connections 256.0" not in text and time.monotonic() < deadline:
            text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).read().decode()
        assert "gnnstore_data_port_connections 256.0" in text, "the strangers did not fill the port"
        with caplog.at_level(logging.WARNING, logger="gnnstore.client.channel"):
            batches, connection = epoch(full.address)
        assert server_stats(full.address)[SAMPLE].requests == 4, "each batch sampled once"
        assert connection.data_port().fetched == 0
        warned = [r.getMessage() for r in caplog.records if "data port is full" in r.getMessage()]
        assert len(warned) == 1, "said once"
        assert_same(batches, epoch(server.address, use_data_port=False)[0], graph)
    finally:
        for conn in strangers:
            conn.close()
        full.stop()


def test_a_ticket_is_not_read_once_its_token_is_revoked(graph: Data, tmp_path: Path) -> None:
    """A ticket used to stay readable for its 30 s after the token that got it was revoked."""
    kept, revoked = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{kept} reader kept\n{revoked} reader revoked\n")
    tokens.chmod(0o600)
    secure = start_server(ingest(graph, tmp_path / "data"), "--read-only", "--auth-file", str(tokens), name="auth")
    try:
        tickets = {}
        for token in (kept, revoked):
            connection = Connection(secure.address, timeout=30, token=token, shared_memory=False)
            for seed in (1, 2):
                request = node_input_to_proto(NodeSamplerInput(input_id=None, node=torch.arange(300)))
                request.options.CopyFrom(options_to_proto([10, 5], replace=False, disjoint=False, seed=seed))
                request.features.CopyFrom(RemoteFeatureStore(connection).exchange.request([(None, "x")], 0))
                request.accept_payload = request.accept_data_port = True
                ticket = connection.call("GraphService", "SampleFromNodes", request).message.data_port_ticket
                assert ticket.size > 0
                tickets[token, seed] = ticket
            connection.close()
        reader = DataPortClient("127.0.0.1", None)
        assert len(reader.fetch(tickets[revoked, 1], timeout=10)) == tickets[revoked, 1].size  # before revoking
        tokens.write_text(f"{kept} reader kept\n")
        secure.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 10
        while "reloaded 1 token(s)" not in secure.log.read_text():
            assert time.monotonic() < deadline, "SIGHUP did not reload the tokens"
            time.sleep(0.05)
        with pytest.raises(ServerUnavailableError, match="holds no payload"):
            reader.fetch(tickets[revoked, 2], timeout=10)
        assert len(reader.fetch(tickets[kept, 2], timeout=10)) == tickets[kept, 2].size, "other tokens' tickets stand"
        reader.close()
    finally:
        secure.stop()
