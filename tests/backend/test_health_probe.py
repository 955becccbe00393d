"""The health probe of containers and Kubernetes pods, against real servers, plain and TLS."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from certificates import make_pki
from served import ingest, start_server

from gnnstore.ingest.generator import generate_graph


def _probe(address: str, **env: str) -> subprocess.CompletedProcess:
    port = address.rpartition(":")[2]
    environ = {k: v for k, v in os.environ.items() if k != "GNNSTORE_TLS_CA"}
    return subprocess.run([sys.executable, "-m", "gnnstore.backend.server.health_probe"], capture_output=True,
                          text=True, timeout=60, env={**environ, "GNNSTORE_PORT": port, **env})


def test_the_probe_passes_a_serving_server_and_fails_one_that_stopped(tmp_path: Path) -> None:
    server = start_server(ingest(generate_graph(100, 4.0, 4, 2, seed=1), tmp_path / "data"), "--read-only")
    try:
        serving = _probe(server.address)
        assert serving.returncode == 0 and serving.stderr == "", serving.stderr
    finally:
        server.stop()
    stopped = _probe(server.address)
    assert stopped.returncode == 1
    assert stopped.stderr.strip() == f"gnnstore on localhost:{server.address.rpartition(':')[2]}: UNAVAILABLE"


def test_over_tls_the_probe_trusts_the_ca_it_is_given(tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    data_dir = ingest(generate_graph(100, 4.0, 4, 2, seed=1), tmp_path / "data")
    server = start_server(data_dir, "--read-only", "--tls-cert", str(pki.server_cert), "--tls-key", str(pki.server_key))
    try:
        assert _probe(server.address, GNNSTORE_TLS_CA=str(pki.ca)).returncode == 0
        wrong_ca = _probe(server.address, GNNSTORE_TLS_CA=str(pki.other_ca))
        plaintext = _probe(server.address)
        assert wrong_ca.returncode == plaintext.returncode == 1
        assert wrong_ca.stderr.endswith(": UNAVAILABLE\n") and plaintext.stderr.endswith(": UNAVAILABLE\n")
        missing = _probe(server.address, GNNSTORE_TLS_CA=str(tmp_path / "nowhere.pem"))
        assert missing.returncode == 1 and "cannot read $GNNSTORE_TLS_CA" in missing.stderr
        assert str(tmp_path) not in missing.stderr
    finally:
        server.stop()
