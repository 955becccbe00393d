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
    """The compose test goes first: it mostly waits (for the Docker engine, the image build),
    which the other workers fill.

    The suite runs with ``--dist load`` (``scripts/test.sh``): tests spread over the workers one
    by one, so a file's module fixtures are made once per worker that runs one of its tests, and
    no test may count on another having run before it. (Grouping by ``xdist_group`` marks,
    ``--dist loadgroup``, is silently a no-op with pytest 9.2: pytest-xdist issue #1386.)"""
    items.sort(key=lambda item: item.path.name != "test_compose.py")  # stable: the rest keep their order
