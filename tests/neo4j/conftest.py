"""Neo4j fixtures: the session server (tests/neo4j_server.py) and a clean database per test."""
from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from neo4j import Driver, GraphDatabase

from neo4j_server import neo4j_server  # noqa: F401 - registers the session fixture

# The graph-store contract lives beside the other stores' tests; import it by its module name
# as tests/stores does.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "stores"))


def wipe(driver: Driver) -> None:
    """Delete every node and relationship, and every constraint and index gnnstore did not make.

    gnnstore's own (``gnnstore_*``: unique ids, eid indexes) stay: they are created
    ``IF NOT EXISTS``, constrain nothing on an empty database, and cost a second each to rebuild.
    """
    with driver.session() as session:  # CALL ... IN TRANSACTIONS needs an implicit transaction
        session.run("MATCH (n) CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF 10000 ROWS").consume()
    for record in driver.execute_query("SHOW CONSTRAINTS YIELD name").records:
        if not record["name"].startswith("gnnstore_"):
            driver.execute_query(f"DROP CONSTRAINT `{record['name']}` IF EXISTS")
    for record in driver.execute_query("SHOW INDEXES YIELD name, type, owningConstraint").records:
        name = record["name"]
        if record["type"] != "LOOKUP" and not record["owningConstraint"] and not name.startswith("gnnstore_"):
            driver.execute_query(f"DROP INDEX `{name}` IF EXISTS")


@pytest.fixture
def neo4j_clean(neo4j_server: tuple) -> Iterator[tuple]:  # noqa: F811 - the imported fixture
    """``(uri, auth)`` of the session's Neo4j, emptied before the test runs."""
    uri, auth = neo4j_server
    with GraphDatabase.driver(uri, auth=auth) as driver:
        wipe(driver)
    yield uri, auth
