"""A server on a network: tokens and roles, TLS and mutual TLS, against real server processes.

Certificates are made at run time (``certificates.py``); three servers over one graph: tokens
over plaintext (from an auth file), tokens over TLS and tokens over mutual TLS (from
``$GNNSTORE_AUTH_TOKENS``).
"""
from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
import warm_launcher
from certificates import Pki, make_pki
from grpc_health.v1 import health_pb2
from served import ServerProcess, ingest, start_server
from torch_geometric.data import Data
from torch_geometric.data.feature_store import TensorAttr
from torch_geometric.loader import NodeLoader
from torch_geometric.nn import GraphSAGE
from torch_geometric.sampler import NodeSamplerInput

from gnnstore.client import (
    Connection,
    GraphWriter,
    RemoteNeighborSampler,
    client_stats,
    connect,
    server_info,
    server_stats,
)
from gnnstore.client.remote_feature_store import RemoteFeatureStore
from gnnstore.client.sampler_wire import node_input_to_proto
from gnnstore.common.errors import AuthenticationError, PermissionDeniedError, ServerUnavailableError
from gnnstore.proto import graph_pb2
from gnnstore.proto.reply_segment import ReplySegment
from gnnstore.proto.sampling_options import options_to_proto

TOKENS = {role: f"{role}-{secrets.token_urlsafe(24)}" for role in ("reader", "writer", "admin")}
UNKNOWN = secrets.token_urlsafe(24)
ENV_ENTRIES = ",".join(f"{token} {role} {role}-client" for role, token in TOKENS.items())


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def data_dir(homo_graph: Data, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return ingest(homo_graph, tmp_path_factory.mktemp("secure") / "data")


def _auth_file(folder: Path, entries: dict[str, str]) -> Path:
    path = folder / "tokens"
    path.write_text("# token role name\n\n" + "".join(f"{t} {r} {r}-client\n" for r, t in entries.items()))
    path.chmod(0o600)
    return path


@pytest.fixture(scope="module")
def servers(data_dir: Path, pki: Pki) -> Iterator[dict[str, ServerProcess]]:
    """One writable server at a time would do, but each mode needs its own process; three
    processes over copies of one data directory keep the RocksDB lock to one writer each."""
    started: dict[str, ServerProcess] = {}
    env = {"GNNSTORE_AUTH_TOKENS": ENV_ENTRIES}
    tls = ("--tls-cert", str(pki.server_cert), "--tls-key", str(pki.server_key))
    try:
        for mode, args, environ in [
            ("plain", ("--auth-file", str(_auth_file(data_dir.parent, TOKENS))), None),
            ("tls", tls, env),
            ("mtls", (*tls, "--tls-client-ca", str(pki.ca)), env),
        ]:
            copy = data_dir.parent / f"data-{mode}"
            subprocess.run(["cp", "-a", str(data_dir), str(copy)], check=True)
            started[mode] = start_server(copy, *args, env=environ, name=mode)
        yield started
    finally:
        for server in started.values():
            server.stop()


def _client_tls(mode: str, pki: Pki) -> dict[str, object]:
    if mode == "plain":
        return {}
    if mode == "tls":
        return {"tls": pki.ca}
    return {"tls": pki.ca, "client_cert": pki.client_cert, "client_key": pki.client_key}


def _sample(fs: RemoteFeatureStore) -> None:
    out = RemoteNeighborSampler(fs, [2]).sample_from_nodes(
        NodeSamplerInput(input_id=None, node=torch.tensor([0, 1]))
    )
    assert out.node[:2].tolist() == [0, 1]


def _multi_get(fs: RemoteFeatureStore) -> None:
    (rows,) = fs.fetch_rows([TensorAttr(None, "x", torch.tensor([3, 1]))])
    assert rows.shape[0] == 2


def _put(fs: RemoteFeatureStore) -> None:
    fs.put_tensor(torch.ones(400, 2), group_name=None, attr_name="scratch", index=None)


def _remove(fs: RemoteFeatureStore) -> None:
    assert fs.remove_tensor(group_name=None, attr_name="scratch", index=None)


def _write_graph(fs: RemoteFeatureStore) -> None:
    before = server_info(fs.connection).graph_version
    assert GraphWriter(fs).write(add_edges={None: (torch.tensor([0]), torch.tensor([1]))}).version == before + 1


def _stats(fs: RemoteFeatureStore) -> None:
    assert server_stats(fs.connection)


def _health(fs: RemoteFeatureStore) -> None:
    reply = fs.connection.call("Health", "Check", health_pb2.HealthCheckRequest())
    assert reply.status == health_pb2.HealthCheckResponse.SERVING


CELLS: dict[str, Callable[[RemoteFeatureStore], None]] = {
    "sample": _sample, "MultiGet": _multi_get, "Put": _put, "Remove": _remove, "WriteGraph": _write_graph,
    "Stats": _stats, "Health": _health,
}
OK, UNAUTH, DENIED = "ok", AuthenticationError, PermissionDeniedError
EXPECTED = {
    "no token": dict(sample=UNAUTH, MultiGet=UNAUTH, Put=UNAUTH, Remove=UNAUTH, WriteGraph=UNAUTH, Stats=UNAUTH,
                     Health=OK),
    "unknown token": dict(sample=UNAUTH, MultiGet=UNAUTH, Put=UNAUTH, Remove=UNAUTH, WriteGraph=UNAUTH,
                          Stats=UNAUTH, Health=OK),
    "reader": dict(sample=OK, MultiGet=OK, Put=DENIED, Remove=DENIED, WriteGraph=DENIED, Stats=DENIED, Health=OK),
    "writer": dict(sample=OK, MultiGet=OK, Put=OK, Remove=OK, WriteGraph=OK, Stats=DENIED, Health=OK),
    "admin": dict(sample=OK, MultiGet=OK, Put=OK, Remove=OK, WriteGraph=OK, Stats=OK, Health=OK),
}


@pytest.mark.parametrize("mode", ["plain", "tls", "mtls"])
def test_every_role_gets_the_status_its_cell_says(
    servers: dict[str, ServerProcess], pki: Pki, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GNNSTORE_TOKEN", raising=False)
    address = servers[mode].address
    tokens = {"no token": "", "unknown token": UNKNOWN, **TOKENS}
    for who, row in EXPECTED.items():
        fs, _ = connect(address, token=tokens[who], shared_memory=False, **_client_tls(mode, pki))
        for method, expected in row.items():
            if expected == OK:
                CELLS[method](fs)
                continue
            with pytest.raises(expected) as refused:
                CELLS[method](fs)
            text = str(refused.value)
            if expected is DENIED:
                assert f"needs the {'admin' if method == 'Stats' else 'writer'} role" in text
                assert f"this token ({who}-client) is a {who}" in text
            else:
                assert "needs a token" in text
            assert all(token not in text for token in tokens.values() if token), text
    clients = client_stats(Connection(address, token=TOKENS["admin"], **_client_tls(mode, pki)))
    assert {"reader-client", "writer-client", "admin-client", "unauthenticated"} <= set(clients)
    assert "anonymous" not in clients  # a server with tokens has no anonymous admin
    assert clients["reader-client"].role == "reader" and clients["reader-client"].requests >= 2
    assert clients["unauthenticated"].errors >= 10  # the refused calls of no and unknown tokens
    assert clients["unauthenticated"].role == "none"


def test_a_token_from_the_environment_is_used_by_every_stub(
    servers: dict[str, ServerProcess], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GNNSTORE_TOKEN", TOKENS["reader"])
    fs, _ = connect(servers["plain"].address, cache_bytes=1 << 16)  # HotNodes and MultiGet
    assert fs.cache.stats().hits == 0
    _sample(fs)
    with pytest.raises(PermissionDeniedError, match="FeatureService.Put needs the writer role"):
        _put(fs)


def _elapsed(call: Callable[[], object], error: type[Exception], match: str) -> float:
    started = time.monotonic()
    with pytest.raises(error, match=match):
        call()
    return time.monotonic() - started


def test_tls_failures_are_clear_and_quick(servers: dict[str, ServerProcess], pki: Pki) -> None:
    tls_address, mtls_address = servers["tls"].address, servers["mtls"].address
    reader = TOKENS["reader"]
    attempts = [
        # A plaintext client against a TLS server.
        (lambda: connect(tls_address, token=reader, tls=False, cache_bytes=1 << 16), "TLS"),
        # A TLS client that trusts another CA.
        (lambda: connect(tls_address, token=reader, tls=pki.other_ca, cache_bytes=1 << 16),
         "TLS with the gnnstore server .* failed"),
        # Mutual TLS: a client without a certificate.
        (lambda: connect(mtls_address, token=reader, tls=pki.ca, cache_bytes=1 << 16), "TLS"),
        # TLS against the plaintext server.
        (lambda: connect(servers["plain"].address, token=reader, tls=pki.ca, cache_bytes=1 << 16), "TLS"),
    ]
    for attempt, match in attempts:
        assert _elapsed(attempt, ServerUnavailableError, match) < 20  # refused, not hung to the deadline
    fs, _ = connect(mtls_address, token=reader, **_client_tls("mtls", pki), cache_bytes=1 << 16)
    assert fs.connection.uses_tls


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_loaders_with_two_workers_train_over_mutual_tls_with_a_token(
    servers: dict[str, ServerProcess], pki: Pki, homo_graph: Data, context: str
) -> None:
    fs, gs = connect(servers["mtls"].address, token=TOKENS["reader"], cache_bytes=1 << 16,
                     **_client_tls("mtls", pki))
    sampler = RemoteNeighborSampler(fs, [4, 2], feature_store=fs)
    seeds = torch.arange(200)
    loader = NodeLoader((fs, gs), node_sampler=sampler, input_nodes=seeds, batch_size=50, shuffle=True,
                        num_workers=2, multiprocessing_context=context)
    torch.manual_seed(0)
    model = GraphSAGE(homo_graph.num_features, 16, 2, int(homo_graph.y.max()) + 1)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.02)
    losses = []
    for _ in range(4):
        seen, total = [], 0.0
        for batch in loader:
            assert torch.equal(batch.x, homo_graph.x[batch.n_id])
            optimizer.zero_grad()
            out = model(batch.x, batch.edge_index)[: batch.batch_size]
            loss = F.cross_entropy(out, batch.y[: batch.batch_size])
            loss.backward()
            optimizer.step()
            total += loss.item()
            seen.append(batch.input_id)
        assert torch.equal(torch.cat(seen).sort().values, seeds)
        losses.append(total)
    assert losses[-1] < losses[0]


def test_a_client_that_names_another_trainers_segment_is_refused_and_the_batch_is_unchanged(
    servers: dict[str, ServerProcess],
) -> None:
    victim = connect(servers["plain"].address, token=TOKENS["reader"], shared_memory=False)[0].connection
    attacker = connect(servers["plain"].address, token=TOKENS["reader"], shared_memory=False)[0].connection
    segment = ReplySegment(1 << 20)
    own = _sample_request(torch.arange(8), seed=1)
    own.reply_segment.CopyFrom(segment.message)
    assert victim.call("GraphService", "SampleFromNodes", own).message.reply_segment.used  # the victim's batch
    before = bytes(segment.view)

    other = _sample_request(torch.arange(100, 164), seed=3)
    for nonce in (bytes(16), secrets.token_bytes(16), b""):
        stolen = graph_pb2.ReplySegment()
        stolen.CopyFrom(segment.message)  # pid, fd, inode and size all correct
        stolen.nonce = nonce
        other.reply_segment.CopyFrom(stolen)
        reply = attacker.call("GraphService", "SampleFromNodes", other).message
        refused = reply.reply_segment.refused
        assert "nonce" in refused and not reply.reply_segment.used, refused
        assert "/" not in refused  # no /proc path, no readlink target
        assert reply.node[0].ids.data  # the attacker's sample came inline
    assert bytes(segment.view) == before
    other.reply_segment.CopyFrom(segment.message)  # with the owner's nonce the server does write there
    assert victim.call("GraphService", "SampleFromNodes", other).message.reply_segment.used
    assert bytes(segment.view) != before
    segment.close()


def _sample_request(seeds: torch.Tensor, seed: int) -> graph_pb2.SampleFromNodesRequest:
    request = node_input_to_proto(NodeSamplerInput(input_id=None, node=seeds))
    request.options.CopyFrom(options_to_proto([5, 5], replace=True, disjoint=False, seed=seed))
    return request


def _serve(data_dir: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k != "GNNSTORE_AUTH_TOKENS"}
    return warm_launcher.run(
        [sys.executable, "-m", "gnnstore", "serve", "--data-dir", str(data_dir), "--port", "0", *args],
        capture_output=True, text=True, timeout=60, env={**environ, **(env or {})},
    )


def test_a_non_loopback_bind_without_tokens_is_refused_unless_insecure(data_dir: Path, tmp_path: Path) -> None:
    refused = _serve(data_dir, "--host", "0.0.0.0")
    assert refused.returncode == 1
    assert "refusing to serve on 0.0.0.0 without tokens" in refused.stderr
    assert "--auth-file" in refused.stderr and "GNNSTORE_AUTH_TOKENS" in refused.stderr
    assert "--insecure" in refused.stderr
    copy = tmp_path / "data"
    subprocess.run(["cp", "-a", str(data_dir), str(copy)], check=True)
    for extra, env, warning in [
        (("--insecure",), None, "--insecure: serving 0.0.0.0 without tokens"),
        ((), {"GNNSTORE_AUTH_TOKENS": ENV_ENTRIES}, "without TLS: tokens and data cross the network in plaintext"),
    ]:
        server = ServerProcess(copy, "--host", "0.0.0.0", *extra, env=env, log=tmp_path / "serve.log")
        try:
            assert server.address.startswith("0.0.0.0:")
        finally:
            assert server.stop() == 0
        assert warning in (tmp_path / "serve.log").read_text()
    assert TOKENS["admin"] not in (tmp_path / "serve.log").read_text()


def test_tokens_never_come_from_flags_and_bad_entries_name_no_token(data_dir: Path) -> None:
    from click.testing import CliRunner

    from gnnstore.cli import cli

    flag = CliRunner().invoke(cli, ["serve", "--data-dir", str(data_dir), "--auth-tokens", f"{TOKENS['admin']} admin"])
    assert flag.exit_code != 0 and "No such option '--auth-tokens'" in flag.output
    role = _serve(data_dir, env={"GNNSTORE_AUTH_TOKENS": f"{TOKENS['admin']} root"})
    assert role.returncode == 1 and "error: $GNNSTORE_AUTH_TOKENS entry 1: role 'root' is not one of" in role.stderr
    assert TOKENS["admin"] not in role.stderr  # (entries that do not fit: tests/backend/test_auth.py)


def test_sighup_reloads_the_auth_file(data_dir: Path, tmp_path: Path) -> None:
    copy = tmp_path / "data"
    subprocess.run(["cp", "-a", str(data_dir), str(copy)], check=True)
    old, new = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
    auth_file = _auth_file(tmp_path, {"reader": old})
    with ServerProcess(copy, "--auth-file", str(auth_file), log=tmp_path / "serve.log") as server:
        _multi_get(connect(server.address, token=old)[0])
        _auth_file(tmp_path, {"admin": new})
        server.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 30
        while True:
            try:
                _multi_get(connect(server.address, token=new)[0])
                break
            except AuthenticationError:
                assert time.monotonic() < deadline, "the new token was not accepted after SIGHUP"
                time.sleep(0.1)
        with pytest.raises(AuthenticationError):
            _multi_get(connect(server.address, token=old)[0])
        auth_file.write_text("not a token line with five fields\n")  # a broken edit keeps the tokens
        server.proc.send_signal(signal.SIGHUP)
        time.sleep(1.0)
        _multi_get(connect(server.address, token=new)[0])
        assert server.proc.poll() is None
    assert "kept the previous 1 token(s)" in (tmp_path / "serve.log").read_text()


def test_tls_files_that_do_not_fit_are_named_by_their_setting(pki: Pki, tmp_path: Path) -> None:
    from gnnstore.common.errors import InvalidRequestError

    not_pem = tmp_path / "not.pem"
    not_pem.write_text("hello")
    for kwargs, match in [
        ({"tls": tmp_path / "missing.pem"}, "tls cannot be read: No such file"),
        ({"tls": not_pem}, "tls is not a PEM file"),
        ({"tls": pki.ca, "client_cert": pki.client_cert}, "client_cert and client_key come together"),
        ({"tls": False, "client_cert": pki.client_cert, "client_key": pki.client_key}, "client_cert needs TLS"),
    ]:
        with pytest.raises(InvalidRequestError, match=match) as refused:
            connect("127.0.0.1:1", **kwargs)
        assert str(tmp_path) not in str(refused.value)
