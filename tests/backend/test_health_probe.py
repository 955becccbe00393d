"""The health probe of the image's HEALTHCHECK and of Kubernetes pods: a real server, and a bare
gRPC health service whose status the test sets, plain and over TLS."""
from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent import futures
from contextlib import contextmanager
from pathlib import Path

import grpc
import pytest
from certificates import Pki, make_pki
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from served import ingest, start_server

from gnnstore.ingest.generator import generate_graph


def _probe(port: int | str, *args: str, **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k != "GNNSTORE_TLS_CA"}
    return subprocess.run([sys.executable, "-m", "gnnstore.backend.server.health_probe", *args], capture_output=True,
                          text=True, timeout=60, env={**environ, "GNNSTORE_PORT": str(port), **env})


def test_the_probe_passes_a_serving_server_and_fails_one_that_stopped(tmp_path: Path) -> None:
    server = start_server(ingest(generate_graph(100, 4.0, 4, 2, seed=1), tmp_path / "data"), "--read-only")
    port = server.address.rpartition(":")[2]
    try:
        serving = _probe(port)
        assert serving.returncode == 0 and serving.stderr == "", serving.stderr
    finally:
        server.stop()
    stopped = _probe(port)
    assert stopped.returncode == 1 and stopped.stderr == f"gnnstore on localhost:{port}: UNAVAILABLE\n"


@contextmanager
def _health_service(pki: Pki | None) -> Iterator[tuple[health.HealthServicer, int, dict[str, str]]]:
    """A bare health service (TLS with ``pki``'s server certificate), its port, and the probe's
    environment to reach it."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    if pki is None:
        port, env = server.add_insecure_port("127.0.0.1:0"), {}
    else:
        credentials = grpc.ssl_server_credentials([(pki.server_key.read_bytes(), pki.server_cert.read_bytes())])
        port, env = server.add_secure_port("127.0.0.1:0", credentials), {"GNNSTORE_TLS_CA": str(pki.ca)}
    server.start()
    try:
        yield servicer, port, env
    finally:
        server.stop(None)


@pytest.mark.parametrize("tls", [False, True], ids=["plain", "tls"])
def test_the_probe_passes_only_serving(tls: bool, tmp_path: Path) -> None:
    with _health_service(make_pki(tmp_path) if tls else None) as (servicer, port, env):
        servicer.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
        not_serving = _probe(port, **env)
        assert not_serving.returncode == 1 and not_serving.stderr == f"gnnstore on localhost:{port}: NOT_SERVING\n"
        servicer.set("", health_pb2.HealthCheckResponse.SERVING)
        assert _probe(port, **env).returncode == 0


def test_the_liveness_probe_passes_not_serving_too_and_nothing_else(tmp_path: Path) -> None:
    with _health_service(None) as (servicer, port, _):
        servicer.set("", health_pb2.HealthCheckResponse.NOT_SERVING)  # a replica behind, or waiting
        assert _probe(port, "--alive").returncode == 0
        servicer.set("", health_pb2.HealthCheckResponse.SERVICE_UNKNOWN)
        unknown = _probe(port, "--alive")
        assert unknown.returncode == 1 and unknown.stderr == f"gnnstore on localhost:{port}: SERVICE_UNKNOWN\n"
    gone = _probe(port, "--alive")
    assert gone.returncode == 1 and gone.stderr.endswith(": UNAVAILABLE\n")
    wrong = _probe(port, "--ready")
    assert wrong.returncode == 2 and "usage:" in wrong.stderr


def test_over_tls_the_probe_trusts_only_the_ca_it_is_given(tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")  # the server's certificate names localhost
    with _health_service(pki) as (servicer, port, _):
        servicer.set("", health_pb2.HealthCheckResponse.SERVING)
        for wrong in (_probe(port, GNNSTORE_TLS_CA=str(pki.other_ca)), _probe(port)):  # another CA; plaintext
            assert wrong.returncode == 1 and wrong.stderr.endswith(": UNAVAILABLE\n"), wrong.stderr
        missing = _probe(port, GNNSTORE_TLS_CA=str(tmp_path / "nowhere.pem"))
        assert missing.returncode == 1 and "cannot read $GNNSTORE_TLS_CA" in missing.stderr
        assert str(tmp_path) not in missing.stderr
