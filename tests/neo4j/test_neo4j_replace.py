"""A replacing put keeps the previous edges readable until the new ones are complete.

Two real failures mid-put: Neo4j refusing an invalid batch (the put raises and removes its
partial edges), and ``kill -9`` of a process blocked after its first batch (the partial edges
stay, invisible, until the next replacing put deletes them).
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
import warm_launcher
from graph_store_contract import random_coo
from neo4j import GraphDatabase
from neo4j.exceptions import Neo4jError

from gnnstore.stores.neo4j_graph_store import Neo4jGraphStore

pytestmark = pytest.mark.neo4j

ET = ("paper", "cites", "paper")
OLD = random_coo(30, 30, 80, seed=1)
NEW = random_coo(30, 30, 120, seed=2)
MID_PUT = "first batch of the new edges is written"

# A child process that replaces ET's edges in batches of 10 and blocks after the first one.
CHILD = textwrap.dedent(f"""
    import json, logging, sys, time
    import torch
    from gnnstore.stores.neo4j_graph_store import Neo4jGraphStore

    class BlockAfterFirstBatch(logging.Handler):
        def emit(self, record):
            if "edges written" in record.getMessage():
                print({MID_PUT!r}, flush=True)
                time.sleep(600)

    log = logging.getLogger("gnnstore.stores.neo4j_graph_store")
    log.setLevel(logging.DEBUG)
    log.addHandler(BlockAfterFirstBatch())
    uri, auth, row, col = json.loads(sys.argv[1])
    store = Neo4jGraphStore(uri, auth and tuple(auth), batch_size=10)
    store.put_edges((torch.tensor(row), torch.tensor(col)), {ET!r}, "coo", (30, 30))
""")


class InvalidThirdBatch(Neo4jGraphStore):
    """Sends Neo4j a batch whose edge ids are maps, which it refuses as property values."""

    def _write_batch(self, schema, gen, row, col, eid):  # noqa: ANN001, ANN202 - the hook's types
        self.batches = getattr(self, "batches", 0) + 1
        if self.batches == 3:
            eid = np.array([{"not": "an id"}] * len(eid), dtype=object)
        super()._write_batch(schema, gen, row, col, eid)


def relationship_count(uri: str, auth: tuple | None) -> int:
    with GraphDatabase.driver(uri, auth=auth) as driver:
        return driver.execute_query("MATCH (:paper)-[r:cites]->(:paper) RETURN count(r) AS n").records[0]["n"]


def assert_edges(store: Neo4jGraphStore, edges: tuple[torch.Tensor, torch.Tensor]) -> None:
    row, col = store.edge_index(ET, "coo")
    assert np.array_equal(row, edges[0].numpy()) and np.array_equal(col, edges[1].numpy())
    chunks = list(store.iter_edge_index(ET, chunk_size=32))
    assert np.array_equal(np.concatenate([c[0] for c in chunks]), edges[0].numpy())


def test_invalid_batch_mid_put_keeps_the_previous_edges(neo4j_clean: tuple) -> None:
    uri, auth = neo4j_clean
    with Neo4jGraphStore(uri, auth) as store:
        store.put_edges(OLD, ET, "coo", (30, 30))
        version = store.version()
    with InvalidThirdBatch(uri, auth, batch_size=10) as store:
        with pytest.raises(Neo4jError, match="[Pp]roperty"):
            store.put_edges(NEW, ET, "coo", (30, 30))
        assert store.batches == 3
        assert_edges(store, OLD)
        assert store.version() == version
        assert relationship_count(uri, auth) == 80  # the two written batches were deleted
        row, col, eid = store.sample_in_neighbors(ET, np.arange(30), 2)
        assert torch.equal(OLD[0][eid], torch.from_numpy(row))  # only old edges are sampled
        assert torch.equal(OLD[1][eid], torch.from_numpy(col))


def test_killed_put_keeps_the_previous_edges_until_the_next_put(neo4j_clean: tuple) -> None:
    uri, auth = neo4j_clean
    with Neo4jGraphStore(uri, auth) as store:
        store.put_edges(OLD, ET, "coo", (30, 30))
        version = store.version()
        arg = json.dumps([uri, auth, NEW[0].tolist(), NEW[1].tolist()])
        child = warm_launcher.popen([sys.executable, "-c", CHILD, arg], stdout=subprocess.PIPE, text=True)
        try:
            assert child.stdout.readline().strip() == MID_PUT, "the child ended before its first batch"
            assert relationship_count(uri, auth) == 90  # 10 new edges are written ...
            assert_edges(store, OLD)  # ... and invisible
        finally:
            child.kill()
            child.wait()
        assert_edges(store, OLD)
        assert store.version() == version
        store.put_edges(NEW, ET, "coo", (30, 30))
        assert_edges(store, NEW)
        assert relationship_count(uri, auth) == 120  # the old and the orphaned edges are gone
