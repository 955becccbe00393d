"""Neo4j fixtures: the session server (tests/neo4j_server.py) and a clean database per test."""
from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from neo4j_server import neo4j_server, wipe  # noqa: F401 - registers the session fixture

# The graph-store contract lives beside the other stores' tests; import it by its module name
# as tests/stores does.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "stores"))


@pytest.fixture
def neo4j_clean(neo4j_server: tuple) -> Iterator[tuple]:  # noqa: F811 - the imported fixture
    """``(uri, auth)`` of the session's Neo4j, emptied before the test runs."""
    uri, auth = neo4j_server
    wipe(uri, auth)
    yield uri, auth
