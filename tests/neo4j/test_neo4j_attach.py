"""`gnnstore attach neo4j`: a graph written by plain Cypher in the user's own schema, read into a
data directory and served; read again after writes; bad values named; Neo4j never written."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import warm_launcher
from neo4j import GraphDatabase
from pyg_views import features_of, graph_of
from served import start_neo4j_server, start_server
from torch_geometric.loader import NodeLoader

from gnnstore.client import EdgeFeatures, RemoteNeighborSampler, connect
from gnnstore.common.errors import InvalidRequestError, PreconditionError
from gnnstore.ingest import neo4j_attach
from gnnstore.ingest.neo4j_attach import read_neo4j_graph, read_spec
from gnnstore.stores.data_dir import GRAPH, GRAPH_EDGES, open_stores

pytestmark = pytest.mark.neo4j

SPEC = """
[labels.Person]
key = "email"
features = { x = "emb", age = "age", vip = "vip" }

[labels.Movie]
key = "mid"
features = { year = "year", score = "score" }

[[relationships]]
from = "Person"
type = "RATED"
to = "Movie"
features = { stars = "stars", weights = "w" }

[[relationships]]
from = "Person"
type = "KNOWS"
to = "Person"

[[relationships]]
from = "Person"
type = "LINKED"
to = "Movie"

[[relationships]]
from = "Movie"
type = "LINKED"
to = "Person"
"""

PEOPLE, MOVIES = 30, 12


def people(rng: np.random.Generator) -> list[dict]:
    return [{"email": f"p{i}@example.org", "age": int(rng.integers(18, 90)), "emb": rng.random(4).tolist(),
             "vip": bool(i % 3 == 0), "name": f"Person {i}"} for i in range(PEOPLE)]


def movies(rng: np.random.Generator) -> list[dict]:
    # Scores mix integers and floats, as a user's data does: they read as float32.
    return [{"mid": 1000 + i, "year": 1990 + i, "score": 7 if i % 2 else 6.5} for i in range(MOVIES)]


def run(uri: str, auth: object, query: str, **params: object) -> list:
    with GraphDatabase.driver(uri, auth=auth) as driver:
        return driver.execute_query(query, params).records


def create_user_graph(uri: str, auth: object) -> tuple[list[dict], list[dict]]:
    """Plain Cypher, the user's schema: two labels, a label left out, four relationship types."""
    rng = np.random.default_rng(0)
    p, m = people(rng), movies(rng)
    run(uri, auth, "UNWIND $rows AS r CREATE (:Person {email: r.email, age: r.age, emb: r.emb, vip: r.vip, "
        "name: r.name})", rows=p)
    run(uri, auth, "UNWIND $rows AS r CREATE (:Movie {mid: r.mid, year: r.year, score: r.score})", rows=m)
    run(uri, auth, "CREATE (:Tag {name: 'not served'})")
    pairs = [(int(rng.integers(PEOPLE)), int(rng.integers(MOVIES))) for _ in range(80)]
    run(uri, auth, "UNWIND $pairs AS pr MATCH (a:Person {email: pr[0]}), (b:Movie {mid: pr[1]}) "
        "CREATE (a)-[:RATED {stars: pr[2], w: [pr[2] / 2.0, 1]}]->(b)",
        pairs=[[p[i]["email"], m[j]["mid"], k % 5 + 1] for k, (i, j) in enumerate(pairs)])
    run(uri, auth, "MATCH (a:Person), (b:Person) WHERE a.age % 7 = b.age % 5 AND a <> b CREATE (a)-[:KNOWS]->(b)")
    run(uri, auth, "MATCH (a:Person), (b:Movie) WHERE a.age % 11 = b.year % 11 CREATE (a)-[:LINKED]->(b)")
    run(uri, auth, "MATCH (a:Person), (b:Movie) WHERE a.age % 13 = b.year % 13 CREATE (b)-[:LINKED]->(a)")
    return p, m


def key_pairs(uri: str, auth: object, src: str, rel: str, dst: str, skey: str, dkey: str) -> list[tuple]:
    records = run(uri, auth, f"MATCH (a:{src})-[:{rel}]->(b:{dst}) RETURN a.{skey} AS s, b.{dkey} AS d")
    return sorted((r["s"], r["d"]) for r in records)


def fingerprint(uri: str, auth: object) -> list:
    """Every node's labels and properties and every relationship: what 'never written' compares."""
    nodes = run(uri, auth, "MATCH (n) RETURN labels(n) AS l, properties(n) AS p")
    rels = run(uri, auth, "MATCH (a)-[r]->(b) RETURN elementId(a) AS a, type(r) AS t, properties(r) AS p, "
               "elementId(b) AS b")
    return sorted(map(repr, [*(dict(r) for r in nodes), *(dict(r) for r in rels)]))


def attach(uri: str, auth: object, spec: Path, data_dir: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "GNNSTORE_NEO4J_USER": auth[0], "GNNSTORE_NEO4J_PASSWORD": auth[1]} if auth else os.environ
    return warm_launcher.run(
        [sys.executable, "-m", "gnnstore", "attach", "neo4j", "--spec", str(spec), "--data-dir", str(data_dir),
         "--neo4j-uri", uri], capture_output=True, text=True, timeout=600, env=env,
    )


def assert_attached(data_dir: Path, uri: str, auth: object, p: list[dict], m: list[dict]) -> None:
    """Ids, features and every edge type in the data directory equal what Neo4j holds."""
    with open_stores(data_dir, read_only=True) as stores:
        fs, gs, ids = features_of(stores), graph_of(stores), stores.id_map
        person_ids = torch.from_numpy(ids.to_ids("Person", [r["email"] for r in p]))
        movie_ids = torch.from_numpy(ids.to_ids("Movie", [r["mid"] for r in m]))
        x = fs.get_tensor(group_name="Person", attr_name="x", index=person_ids)
        assert x.dtype == torch.float32 and torch.allclose(x, torch.tensor([r["emb"] for r in p]))
        age = fs.get_tensor(group_name="Person", attr_name="age", index=person_ids)
        assert age.dtype == torch.int64 and age.tolist() == [r["age"] for r in p]
        vip = fs.get_tensor(group_name="Person", attr_name="vip", index=person_ids)
        assert vip.dtype == torch.bool and vip.tolist() == [r["vip"] for r in p]
        score = fs.get_tensor(group_name="Movie", attr_name="score", index=movie_ids)
        assert score.dtype == torch.float32 and score.tolist() == [float(r["score"]) for r in m]
        rated = ("Person", "RATED", "Movie")  # relationship properties, a row per edge id
        row, col = gs.get_edge_index(edge_type=rated, layout="coo")
        stars = fs.get_tensor(group_name=rated, attr_name="stars", index=None)
        weights = fs.get_tensor(group_name=rated, attr_name="weights", index=None)
        assert stars.dtype == torch.int64 and weights.dtype == torch.float32 and weights.shape == (len(row), 2)
        assert torch.equal(weights, torch.stack([stars / 2.0, torch.ones(len(row))], 1))
        records = run(uri, auth, "MATCH (a:Person)-[r:RATED]->(b:Movie) RETURN a.email AS s, b.mid AS d, r.stars AS k")
        assert sorted(zip(ids.to_keys("Person", row), ids.to_keys("Movie", col), stars.tolist())) == sorted(
            (r["s"], r["d"], r["k"]) for r in records)
        keys = {"Person": "email", "Movie": "mid"}
        for src, rel, dst in [("Person", "RATED", "Movie"), ("Person", "KNOWS", "Person"),
                              ("Person", "LINKED", "Movie"), ("Movie", "LINKED", "Person")]:
            row, col = gs.get_edge_index(edge_type=(src, rel, dst), layout="coo")
            stored = sorted(zip(ids.to_keys(src, row), ids.to_keys(dst, col)))
            assert stored == key_pairs(uri, auth, src, rel, dst, keys[src], keys[dst]), (src, rel, dst)
            assert stored, (src, rel, dst)


def test_attach_reads_the_users_schema_serves_it_and_picks_up_writes(neo4j_clean: tuple, tmp_path: Path) -> None:
    uri, auth = neo4j_clean
    p, m = create_user_graph(uri, auth)
    spec, data_dir = tmp_path / "attach.toml", tmp_path / "data"
    spec.write_text(SPEC)
    before = fingerprint(uri, auth)

    done = attach(uri, auth, spec, data_dir)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"Person: {PEOPLE} nodes ({PEOPLE} new)" in done.stdout
    assert "Movie,LINKED,Person:" in done.stdout and "gnnstore serve --data-dir" in done.stdout
    assert fingerprint(uri, auth) == before, "Neo4j was written"
    assert_attached(data_dir, uri, auth, p, m)
    assert (data_dir / GRAPH_EDGES).is_dir() and not (data_dir / GRAPH).exists(), "edges as files, not in Kùzu"

    with start_server(data_dir, "--read-only") as server:  # the attached graph, served
        fs, gs = connect(server.address)
        sampler = RemoteNeighborSampler(fs, {et: [3, 2] for et in [a.edge_type for a in gs.get_all_edge_attrs()]},
                                        feature_store=fs)
        loader = NodeLoader((fs, gs), node_sampler=sampler, input_nodes=("Person", torch.arange(PEOPLE)),
                            batch_size=10, transform=EdgeFeatures(fs))
        truth = torch.tensor([r["emb"] for r in p])
        with open_stores(data_dir, read_only=True) as stores:
            order = stores.id_map.to_keys("Person", torch.arange(PEOPLE))
        by_id = truth[[int(k[1:].split("@")[0]) for k in order]]
        for batch in loader:
            assert torch.allclose(batch["Person"].x, by_id[batch["Person"].n_id])
            assert batch["Movie"].score.dtype == torch.float32
            rated = batch["Person", "RATED", "Movie"]
            assert rated.stars.shape == rated.e_id.shape and rated.weights.shape == (rated.e_id.numel(), 2)

    # The user's graph moves on: a new person who rates a movie, a person deleted.
    old_ids = dict(zip([r["email"] for r in p], open_stores_ids(data_dir, [r["email"] for r in p])))
    run(uri, auth, "CREATE (:Person {email: 'new@example.org', age: 40, emb: [1.0, 2.0, 3.0, 4.0], vip: false})")
    run(uri, auth, "MATCH (a:Person {email: 'new@example.org'}), (b:Movie {mid: 1003}) "
        "CREATE (a)-[:RATED {stars: 5, w: [2.5, 1.0]}]->(b)")
    run(uri, auth, "MATCH (a:Person {email: 'p5@example.org'}) DETACH DELETE a")
    p = [r for r in p if r["email"] != "p5@example.org"]
    p.append({"email": "new@example.org", "age": 40, "emb": [1.0, 2.0, 3.0, 4.0], "vip": False})
    again = attach(uri, auth, spec, data_dir)
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"Person: {PEOPLE} nodes (1 new, 1 no longer in Neo4j: 'p5@example.org')" in again.stdout
    assert_attached(data_dir, uri, auth, p, m)
    kept = open_stores_ids(data_dir, [r["email"] for r in p[:-1]])
    assert kept == [old_ids[r["email"]] for r in p[:-1]], "known keys keep their ids"
    assert open_stores_ids(data_dir, ["new@example.org"]) == [PEOPLE], "a new key gets the next id"


def open_stores_ids(data_dir: Path, emails: list[str]) -> list[int]:
    with open_stores(data_dir, read_only=True) as stores:
        return stores.id_map.to_ids("Person", emails).tolist()


@pytest.mark.parametrize("bad, message", [
    ("emb: [1.0, 2.0]",
     r"label 'Person', property 'emb', node 'bad@example.org': a list of 2 values where the other nodes have 4"),
    ("emb: 'a string'", r"node 'bad@example.org': a String value, which cannot be a feature"),
    ("age: 3", r"property 'emb', node 'bad@example.org': no value \(every node of the label needs the property\)"),
    ("emb: ['a', 'b', 'c', 'd']", r"node 'bad@example.org': a list holding a String value"),
    ("emb: date('2020-01-01')", r"node 'bad@example.org': a Date value, which cannot be a feature"),
])
def test_a_value_that_does_not_fit_is_named_and_nothing_is_written(
    neo4j_clean: tuple, tmp_path: Path, bad: str, message: str
) -> None:
    uri, auth = neo4j_clean
    create_user_graph(uri, auth)
    run(uri, auth, f"CREATE (:Person {{email: 'bad@example.org', age: 1, vip: true, {bad}}})")
    spec = tmp_path / "attach.toml"
    spec.write_text(SPEC)
    with pytest.raises(InvalidRequestError, match=message):
        read_neo4j_graph(uri, auth, read_spec(spec))
    refused = attach(uri, auth, spec, tmp_path / "data")
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert "node 'bad@example.org'" in refused.stderr
    assert not (tmp_path / "data").exists(), "checked before anything is written"


@pytest.mark.parametrize("stars, message", [
    ("'five'", r"relationship type 'RATED' \(Person -> Movie\), property 'stars', relationship 'p0@example.org' -> 1000: "
               r"a String value, which cannot be a feature"),
    ("null", r"property 'stars', relationship 'p0@example.org' -> 1000: no value \(every relationship of the type"),
])
def test_a_relationship_property_that_does_not_fit_is_named(
    neo4j_clean: tuple, tmp_path: Path, stars: str, message: str
) -> None:
    uri, auth = neo4j_clean
    create_user_graph(uri, auth)
    run(uri, auth, f"MATCH (a:Person {{email: 'p0@example.org'}}), (b:Movie {{mid: 1000}}) "
        f"CREATE (a)-[:RATED {{stars: {stars}, w: [1.0, 1.0]}}]->(b)")
    spec = tmp_path / "attach.toml"
    spec.write_text(SPEC)
    with pytest.raises(InvalidRequestError, match=message):
        read_neo4j_graph(uri, auth, read_spec(spec))


@pytest.mark.parametrize("create, message", [
    ("CREATE (:Person {age: 1, vip: true, emb: [1.0, 2.0, 3.0, 4.0]})",
     r"label 'Person', key 'email': node #\d+ has no key; keys must be integers or strings"),
    ("CREATE (:Person {email: 'p3@example.org', age: 1, vip: true, emb: [1.0, 2.0, 3.0, 4.0]})",
     r"label 'Person', key 'email': key 'p3@example.org' is held by several nodes"),
    ("CREATE (:Person {email: 7, age: 1, vip: true, emb: [1.0, 2.0, 3.0, 4.0]})",
     r"label 'Person', key 'email': mixes integer and string keys"),
])
def test_a_key_that_does_not_fit_is_named(neo4j_clean: tuple, tmp_path: Path, create: str, message: str) -> None:
    uri, auth = neo4j_clean
    create_user_graph(uri, auth)
    run(uri, auth, create)
    spec = tmp_path / "attach.toml"
    spec.write_text(SPEC)
    with pytest.raises(InvalidRequestError, match=message):
        read_neo4j_graph(uri, auth, read_spec(spec))


def test_nodes_and_relationships_read_in_small_pages_give_the_same_graph(
    neo4j_clean: tuple, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri, auth = neo4j_clean
    create_user_graph(uri, auth)
    spec_file = tmp_path / "attach.toml"
    spec_file.write_text(SPEC)
    spec = read_spec(spec_file)
    whole, _, _ = read_neo4j_graph(uri, auth, spec)
    monkeypatch.setattr(neo4j_attach, "PAGE_VALUES", 7)
    paged, _, report = read_neo4j_graph(uri, auth, spec)
    for label in ("Person", "Movie"):  # node properties in pages of 7 nodes too
        for name in ("x", "age", "vip") if label == "Person" else ("year", "score"):
            assert torch.equal(paged[label][name], whole[label][name]), (label, name)
            assert paged[label][name].dtype == whole[label][name].dtype
    for edge_type in whole.edge_types:
        assert torch.equal(paged[edge_type].edge_index, whole[edge_type].edge_index), edge_type
        assert report.edges[edge_type] == whole[edge_type].edge_index.shape[1]
    rated = ("Person", "RATED", "Movie")
    assert torch.equal(paged[rated].stars, whole[rated].stars) and torch.equal(paged[rated].weights, whole[rated].weights)
    assert paged[rated].stars.dtype == torch.int64 and paged[rated].weights.dtype == torch.float32


def test_an_attached_graph_is_sampled_live_in_the_users_own_schema(neo4j_clean: tuple, tmp_path: Path) -> None:
    uri, auth = neo4j_clean
    create_user_graph(uri, auth)
    spec, data_dir = tmp_path / "attach.toml", tmp_path / "data"
    spec.write_text(SPEC)
    done = attach(uri, auth, spec, data_dir)
    assert done.returncode == 0, done.stderr[-3000:]
    rated = ("Person", "RATED", "Movie")

    def sampled_pairs(server: object) -> set[tuple]:
        fs, gs = connect(server.address)
        fanouts = {a.edge_type: [-1] for a in gs.get_all_edge_attrs()}
        loader = NodeLoader((fs, gs), node_sampler=RemoteNeighborSampler(fs, fanouts, feature_store=fs),
                            input_nodes=("Movie", torch.arange(MOVIES)), batch_size=5)
        pairs = set()
        with open_stores(data_dir, read_only=True) as stores:
            for batch in loader:
                row, col = batch[rated].edge_index
                assert (batch[rated].e_id == -1).all()  # the user's relationships have no dense ids
                pairs |= set(zip(stores.id_map.to_keys("Person", batch["Person"].n_id[row]),
                                 stores.id_map.to_keys("Movie", batch["Movie"].n_id[col])))
        return pairs

    with start_neo4j_server(data_dir, uri, auth, "--read-only", sampling="live") as server:
        assert sampled_pairs(server) == set(key_pairs(uri, auth, *rated, "email", "mid"))
        run(uri, auth, "MATCH (a:Person {email: 'p1@example.org'}), (b:Movie {mid: 1011}) "
            "CREATE (a)-[:RATED {stars: 1, w: [0.5, 1.0]}]->(b)")
        run(uri, auth, "CREATE (:Person {email: 'late@example.org', age: 3, emb: [0.0, 0.0, 0.0, 0.0], vip: false})")
        run(uri, auth, "MATCH (a:Person {email: 'late@example.org'}), (b:Movie {mid: 1011}) CREATE (a)-[:RATED]->(b)")
        now = sampled_pairs(server)  # live: the new relationship at once; a node created since has no id yet
        assert ("p1@example.org", 1011) in now and not any(s == "late@example.org" for s, _ in now)

    with pytest.raises(PreconditionError, match="attached to a Neo4j graph in its owner's schema"):
        with start_neo4j_server(data_dir, uri, auth, "--read-only", sampling="snapshot"):
            pass
