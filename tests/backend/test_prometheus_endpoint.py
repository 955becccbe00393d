"""The Prometheus endpoint, scraped from a real server: series, labels, and a port it cannot take."""
from __future__ import annotations

import socket
import urllib.request
from pathlib import Path

import pytest
import torch
from prometheus_client.parser import text_string_to_metric_families
from served import ServerProcess, ingest
from torch_geometric.sampler import NodeSamplerInput

from gnnstore.backend.server.server_process import free_port
from gnnstore.client import RemoteNeighborSampler, connect, server_info
from gnnstore.common.errors import PreconditionError
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
        assert value(samples, "gnnstore_server_info", snapshot_id=version) == 1
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
