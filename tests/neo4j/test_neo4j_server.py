"""The suite's Neo4j: Bolt answers, it is 5.26, and it keeps what is written."""
from __future__ import annotations

import pytest
from neo4j import GraphDatabase

pytestmark = pytest.mark.neo4j


def test_bolt_answers_with_neo4j_5_26(neo4j_clean: tuple) -> None:
    uri, auth = neo4j_clean
    assert uri.startswith("bolt://")
    with GraphDatabase.driver(uri, auth=auth) as driver:
        records = driver.execute_query("CALL dbms.components() YIELD name, versions").records
    assert records[0]["name"] == "Neo4j Kernel"
    assert records[0]["versions"][0].startswith("5.26.")


def test_writes_are_read_back_and_wiped_between_tests(neo4j_clean: tuple) -> None:
    uri, auth = neo4j_clean
    with GraphDatabase.driver(uri, auth=auth) as driver:
        assert driver.execute_query("MATCH (n) RETURN count(n) AS c").records[0]["c"] == 0
        driver.execute_query("UNWIND range(0, 9) AS i CREATE (:Probe {id: i})")
        count = driver.execute_query("MATCH (n:Probe) RETURN count(n) AS c").records[0]["c"]
    assert count == 10


def test_cypher5_per_row_limit_runs(neo4j_clean: tuple) -> None:
    """The live sampler relies on a scoped CALL with ORDER BY rand() LIMIT k (Cypher 5)."""
    uri, auth = neo4j_clean
    query = "UNWIND [1, 2] AS i CALL (i) { UNWIND range(1, 10) AS j RETURN j ORDER BY rand() LIMIT 3 } RETURN i, count(j) AS n"
    with GraphDatabase.driver(uri, auth=auth) as driver:
        rows = {r["i"]: r["n"] for r in driver.execute_query(query).records}
    assert rows == {1: 3, 2: 3}
