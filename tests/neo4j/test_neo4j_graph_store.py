"""Neo4jGraphStore against a real Neo4j: the graph-store contract plus what Neo4j adds."""
from __future__ import annotations

import pickle
from pathlib import Path

import pytest
import torch
from graph_store_contract import GraphStoreContract, random_coo
from neo4j import GraphDatabase

from gnnstore.common.errors import InvalidRequestError, PreconditionError
from gnnstore.stores.neo4j_graph_store import Neo4jGraphStore
from gnnstore.stores.pyg_graph_store import PyGGraphStore

pytestmark = pytest.mark.neo4j

ET = ("paper", "cites", "paper")


class TestNeo4jGraphStore(GraphStoreContract):
    @pytest.fixture(autouse=True)
    def _server(self, neo4j_clean: tuple) -> None:
        self.uri, self.auth = neo4j_clean

    def make_store(self, tmp_path: Path) -> PyGGraphStore:
        return PyGGraphStore(Neo4jGraphStore(self.uri, self.auth, batch_size=64))  # small: writes and reads page


@pytest.fixture
def store(neo4j_clean: tuple) -> PyGGraphStore:
    uri, auth = neo4j_clean
    with PyGGraphStore(Neo4jGraphStore(uri, auth, batch_size=7)) as s:
        yield s


def cypher(store: PyGGraphStore, query: str) -> list:
    with GraphDatabase.driver(store.store.uri, auth=store.store.auth) as driver:
        return driver.execute_query(query).records


def test_edges_are_relationships_between_id_nodes(store: PyGGraphStore) -> None:
    store.put_edge_index((torch.tensor([0, 2]), torch.tensor([1, 1])), ("author", "writes", "paper"), "coo", size=(3, 2))
    rows = cypher(store, "MATCH (a:author)-[r:writes]->(b:paper) RETURN a.id AS a, b.id AS b, r.eid AS e ORDER BY e")
    assert [(r["a"], r["b"], r["e"]) for r in rows] == [(0, 1, 0), (2, 1, 1)]
    assert cypher(store, "MATCH (n:author) RETURN count(n) AS n")[0]["n"] == 3
    constraints = cypher(store, "SHOW CONSTRAINTS YIELD labelsOrTypes, properties, type")
    assert {(c["labelsOrTypes"][0], c["type"]) for c in constraints} >= {
        ("author", "UNIQUENESS"), ("paper", "UNIQUENESS")}  # fmt: skip


def test_same_relation_between_other_labels_does_not_mix(store: PyGGraphStore) -> None:
    types = {("user", "rates", "item"): random_coo(5, 8, 40, 1),
             ("user", "rates", "shop"): random_coo(5, 4, 12, 3),
             ("item", "rates", "user"): random_coo(8, 5, 25, 4)}  # fmt: skip
    for et, coo in types.items():
        store.put_edge_index(coo, et, "coo")
    for et, (row, col) in types.items():
        got = store.get_edge_index(et, "coo")
        assert torch.equal(got[0], row) and torch.equal(got[1], col), et


def test_odd_names_are_encoded_and_never_run(store: PyGGraphStore) -> None:
    et = ("x`]->() DETACH DELETE a //", "cites", "paper")
    store.put_edge_index(random_coo(3, 3, 4), ET, "coo")
    store.put_edge_index(random_coo(3, 3, 5), et, "coo")
    assert cypher(store, "MATCH ()-[r:cites]->() RETURN count(r) AS n")[0]["n"] == 9
    labels = {r["label"] for r in cypher(store, "CALL db.labels() YIELD label RETURN label")}
    assert "paper" in labels and any(label.startswith("_x") for label in labels)


def test_version_survives_a_new_store_object(store: PyGGraphStore) -> None:
    store.put_edge_index(random_coo(4, 4, 6), ET, "coo", size=(4, 4))
    version = store.version()
    assert version.startswith("neo4j-")
    with Neo4jGraphStore(store.store.uri, store.store.auth) as other:
        assert other.version() == version


def test_store_pickles_without_its_driver(store: PyGGraphStore) -> None:
    store.put_edge_index(random_coo(4, 4, 5), ET, "coo")
    assert store.store.driver is not None
    clone = pickle.loads(pickle.dumps(store))
    assert clone.store._driver is None
    assert torch.equal(clone.get_edge_index(ET, "coo")[0], store.get_edge_index(ET, "coo")[0])
    clone.close()


def test_short_csr_pointer_is_refused(store: PyGGraphStore) -> None:
    """Both graph stores share one validator: rowptr must have num_src + 1 entries."""
    with pytest.raises(InvalidRequestError, match="rowptr has 3 entries"):
        store.put_edge_index((torch.tensor([0, 1, 2]), torch.tensor([1, 2])), None, "csr", size=(4, 4))
    assert store.get_all_edge_attrs() == []


def test_reads_name_an_end_node_whose_id_was_removed_outside_gnnstore(store: PyGGraphStore) -> None:
    """Reads map Neo4j's node ids to dense ids read beforehand: a node without ``id`` is named."""
    store.put_edge_index((torch.tensor([0, 1, 2]), torch.tensor([1, 2, 3])), ET, "coo", size=(4, 4))
    cypher(store, "MATCH (n:paper {id: 2}) REMOVE n.id")
    with pytest.raises(PreconditionError, match=r"an edge ends at a 'paper' node that had no dense id"):
        store.get_edge_index(ET, "coo")


def test_a_node_deleted_outside_gnnstore_is_named_and_no_edge_is_written(store: PyGGraphStore) -> None:
    store.put_edge_index((torch.tensor([0, 1, 2]), torch.tensor([1, 2, 3])), ET, "coo", size=(4, 4))
    cypher(store, "MATCH (n:paper {id: 2}) DETACH DELETE n")
    quotes = ("paper", "quotes", "paper")
    with pytest.raises(PreconditionError, match=r"Neo4j has no 'paper' node with id \[2\] \(1 such ids\)"):
        store.put_edge_index((torch.tensor([3, 0]), torch.tensor([0, 2])), quotes, "coo", size=(4, 4))
    assert cypher(store, "MATCH ()-[r:quotes]->() RETURN count(r) AS n")[0]["n"] == 0
    assert quotes not in {a.edge_type for a in store.get_all_edge_attrs()}
    store.put_edge_index((torch.tensor([3, 0]), torch.tensor([0, 3])), quotes, "coo", size=(4, 4))  # not node 2
    assert [r["e"] for r in cypher(store, "MATCH ()-[r:quotes]->() RETURN r.eid AS e ORDER BY e")] == [0, 1]
