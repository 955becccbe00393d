"""Fixtures every room's tests share."""
from __future__ import annotations

from pathlib import Path

import pytest
import warm_launcher

from gnnstore.backend.server.server_process import ServerProcess

CORA_RAW = Path(__file__).resolve().parent / "data" / "planetoid" / "Cora" / "raw"


@pytest.fixture(scope="session")
def cora_raw() -> Path:
    """The raw Planetoid files of Cora in ``tests/data`` (copy them before PyG processes them)."""
    if not CORA_RAW.is_dir():
        pytest.fail(f"Cora is missing: expected {CORA_RAW}")
    return CORA_RAW


@pytest.fixture(scope="session", autouse=True)
def warm_servers() -> None:
    """Every ``ServerProcess`` of the session forks from a process that imported the server once."""
    ServerProcess.spawn = warm_launcher.popen


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Groups for pytest-xdist (``--dist loadgroup``, as ``scripts/test.sh`` runs the suite): each
    file's tests run on one worker in their order (module fixtures and counters stay as a file
    expects them), and every file with a test of the session's Neo4j on one worker, so one Neo4j
    starts. The compose test goes first: it mostly waits (for the Docker engine, the image build),
    which the other workers fill."""
    neo4j_files = {item.path for item in items if "neo4j_server" in getattr(item, "fixturenames", ())}
    for item in items:
        group = "neo4j" if item.path in neo4j_files else str(item.path)
        item.add_marker(pytest.mark.xdist_group(group))
    items.sort(key=lambda item: item.path.name != "test_compose.py")  # stable: the rest keep their order
