"""The Neo4j fixture's ways to start: without Docker or Java it skips locally and fails in CI
(never skipping there); a way that cannot start Neo4j gives way to the other."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from neo4j_server import ways_to_start

TESTS = Path(__file__).resolve().parents[1]
PROBE = '''
from neo4j_server import neo4j_server

def test_needs_neo4j(neo4j_server):
    assert neo4j_server
'''


@pytest.mark.parametrize(("ci", "outcome"), [("true", "1 error"), ("", "1 skipped")])
def test_no_neo4j_fails_in_ci_and_skips_elsewhere(tmp_path: Path, ci: str, outcome: str) -> None:
    (tmp_path / "test_probe.py").write_text(PROBE)
    env = {**os.environ, "CI": ci, "PATH": str(tmp_path), "DOCKER_HOST": "unix:///nonexistent.sock",
           "PYTHONPATH": str(TESTS), "GNNSTORE_CACHE": str(tmp_path / "cache")}  # fmt: skip
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", str(tmp_path)],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert outcome in result.stdout, result.stdout[-2000:]
    if ci:
        assert "Neo4j is required in CI" in result.stdout and result.returncode != 0
    else:
        assert "java is not on PATH" in result.stdout and result.returncode == 0


def test_a_daemon_that_cannot_start_neo4j_falls_back_to_the_local_launcher(tmp_path: Path) -> None:
    (tmp_path / "test_probe.py").write_text(PROBE)
    env = {**os.environ, "CI": "true", "GNNSTORE_TEST_NEO4J": "docker",  # asked for, but none runs
           "DOCKER_HOST": "unix:///nonexistent.sock", "PYTHONPATH": str(TESTS)}  # fmt: skip
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert "1 passed" in result.stdout and result.returncode == 0, result.stdout[-2000:]


def test_an_unknown_way_to_start_neo4j_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GNNSTORE_TEST_NEO4J", "podman")
    with pytest.raises(ValueError, match="'local' or 'docker'"):
        ways_to_start()
    monkeypatch.setenv("GNNSTORE_TEST_NEO4J", "docker")
    assert ways_to_start() == ["docker", "local"]
