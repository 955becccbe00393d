"""Fixtures every room's tests share."""
from __future__ import annotations

from pathlib import Path

import pytest

CORA_RAW = Path(__file__).resolve().parent / "data" / "planetoid" / "Cora" / "raw"


@pytest.fixture(scope="session")
def cora_raw() -> Path:
    """The raw Planetoid files of Cora in ``tests/data`` (copy them before PyG processes them)."""
    if not CORA_RAW.is_dir():
        pytest.fail(f"Cora is missing: expected {CORA_RAW}")
    return CORA_RAW


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run every test that uses the session's Neo4j on one pytest-xdist worker (``--dist
    loadgroup``, as ``scripts/test.sh`` runs the suite), so that one Neo4j starts, not one a worker."""
    for item in items:
        if "neo4j_server" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("neo4j"))
