"""The Prometheus endpoint, scraped from a real server: series, labels, and a port it cannot take."""
from __future__ import annotations

import socket
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import torch
from prometheus_client.parser import text_string_to_metric_families
from served import ServerProcess, ingest
from torch_geometric.sampler import NodeSamplerInput

from gnnstore.backend.server.prometheus_endpoint import MAX_CONNECTIONS, REQUEST_DEADLINE_S
from gnnstore.backend.server.server_process import free_port
from gnnstore.client import Connection, RemoteNeighborSampler, connect, server_info
from gnnstore.common.errors import AuthenticationError, PreconditionError
from gnnstore.ingest.generator import generate_graph


def scrape(port: int) -> dict[str, list]:
    """Samples by series name: ``[(labels, value), ...]``."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    samples: dict[str, list] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append((sample.labels, sample.value))
    return samples


def value(samples: dict[str, list], name: str, **labels: str) -> float:
    return next(v for found, v in samples[name] if all(found.get(k) == want for k, want in labels.items()))


def test_a_scrape_counts_calls_latencies_bytes_and_the_servers_state(tmp_path: Path) -> None:
    data_dir = ingest(generate_graph(500, 5.0, 8, 3, seed=4), tmp_path / "data")
    port = free_port()
    with ServerProcess(data_dir, "--metrics-port", str(port), log=tmp_path / "server.log") as server:
        fs, _ = connect(server.address, shared_memory=False)
        sampler = RemoteNeighborSampler(fs, [3, 2], feature_store=fs)
        for _ in range(5):
            sampler.sample_from_nodes(NodeSamplerInput(input_id=None, node=torch.arange(20)))
        samples = scrape(port)
        method = "GraphService/SampleFromNodes"
        assert value(samples, "gnnstore_requests_total", method=method) == 5
        assert value(samples, "gnnstore_errors_total", method=method) == 0
        assert value(samples, "gnnstore_bytes_sent_total", method=method) > 0
        assert value(samples, "gnnstore_request_latency_seconds_count", method=method) == 5
        assert value(samples, "gnnstore_request_latency_seconds_bucket", method=method, le="+Inf") == 5
        assert value(samples, "gnnstore_client_requests_total", client="anonymous") >= 5
        assert value(samples, "gnnstore_sampling_queued_requests") == 0
        assert value(samples, "gnnstore_reply_segments_mapped") == 0  # the socket only
        assert value(samples, "gnnstore_data_port_held_bytes") == 0  # payloads too small for it
        assert value(samples, "gnnstore_data_port_connections") == 0
        version = server_info(server.address).snapshot_id
        assert value(samples, "gnnstore_server_info", snapshot_id=version, role="primary") == 1
        assert "gnnstore_replica_lag_seconds" not in samples
        replica_port = free_port()
        with ServerProcess(data_dir, "--replica", "--metrics-port", str(replica_port), log=tmp_path / "replica.log"):
            of_replica = scrape(replica_port)
            assert value(of_replica, "gnnstore_server_info", snapshot_id=version, role="replica") == 1
            assert 0 <= value(of_replica, "gnnstore_replica_lag_seconds") < 60
        assert value(samples, "process_resident_memory_bytes") > 0
        log = (tmp_path / "server.log").read_text()
        assert f"http://127.0.0.1:{port}/metrics" in log and "no authentication" not in log


def test_a_metrics_port_in_use_stops_the_start_with_a_clear_error(tmp_path: Path) -> None:
    data_dir = ingest(generate_graph(200, 5.0, 8, 3, seed=4), tmp_path / "data")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(PreconditionError, match=f"cannot serve metrics on 127.0.0.1:{port}"):
            ServerProcess(data_dir, "--metrics-port", str(port), log=tmp_path / "server.log", startup_timeout=120)


def _threads(pid: int) -> int:
    return int(next(line.split()[1] for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                    if line.startswith("Threads:")))


def test_strangers_get_404_off_metrics_and_cannot_hold_the_endpoint_or_the_server(tmp_path: Path) -> None:
    data_dir = ingest(generate_graph(300, 4.0, 4, 2, seed=1), tmp_path / "data")
    port = free_port()
    with ServerProcess(data_dir, "--metrics-port", str(port), log=tmp_path / "server.log") as server:
        for path in ("/", "/favicon.ico", "/x/../../etc/passwd", "/metricsx"):
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10)
            assert refused.value.code == 404, path
        before = _threads(server.proc.pid)
        stalled = []
        for _ in range(200):  # half-sent requests, never finished
            stalled.append(socket.create_connection(("127.0.0.1", port), timeout=10))
            stalled[-1].sendall(b"GET /metr")
        assert _threads(server.proc.pid) <= before + MAX_CONNECTIONS + 2  # a thread each used to be held
        assert server_info(server.address).num_nodes == {None: 300}  # gRPC answers meanwhile
        time.sleep(REQUEST_DEADLINE_S + 1)  # the stalled ones are cut at their deadline
        assert value(scrape(port), "gnnstore_uptime_seconds") > 0
        for sock in stalled:
            sock.close()

        slow = socket.create_connection(("127.0.0.1", port), timeout=10)  # one byte a second
        started, cut = time.monotonic(), False
        for byte in b"GET /metrics HTTP/1.1\r\nX-Slow: " + b"a" * 60:
            try:
                slow.send(bytes([byte]))
            except OSError:
                cut = True
                break
            time.sleep(0.5)
        cut = cut or slow.recv(1) == b""
        assert cut and time.monotonic() - started < REQUEST_DEADLINE_S + 3, "a slow sender outlived its deadline"
        slow.close()


def test_calls_with_an_unknown_token_are_counted_as_refused_not_as_an_admin(tmp_path: Path) -> None:
    data_dir = ingest(generate_graph(300, 4.0, 4, 2, seed=1), tmp_path / "data")
    port, token = free_port(), "a-known-token-0123456789"
    with ServerProcess(data_dir, "--metrics-port", str(port), log=tmp_path / "server.log",
                       env={"GNNSTORE_AUTH_TOKENS": f"{token} reader trainer"}) as server:
        assert server_info(Connection(server.address, token=token)).num_nodes == {None: 300}
        for wrong in ("not-a-token-of-this-server", None):
            with pytest.raises(AuthenticationError):
                server_info(Connection(server.address, token=wrong, retry_timeout=0))
        samples = scrape(port)
        clients = {(labels["client"], labels["role"]): v for labels, v in samples["gnnstore_client_requests_total"]}
        assert set(clients) == {("trainer", "reader"), ("unauthenticated", "none")}  # never ("anonymous", "admin")
        assert clients[("unauthenticated", "none")] == 2 and clients[("trainer", "reader")] >= 1
