"""Neo4jGraphStore against a real Neo4j: layouts, sizes, edge ids, paging, versions, bad input."""
from __future__ import annotations

import pickle

import pytest
import torch
from neo4j import GraphDatabase
from torch_geometric.data import EdgeAttr

from gnnstore.proto.errors import InvalidRequestError, NotFoundError
from gnnstore.stores.neo4j_graph_store import Neo4jGraphStore

pytestmark = pytest.mark.neo4j

ET = ("paper", "cites", "paper")
WRITES = ("author", "writes", "paper")


@pytest.fixture
def store(neo4j_clean: tuple) -> Neo4jGraphStore:
    uri, auth = neo4j_clean
    with Neo4jGraphStore(uri, auth, batch_size=7) as s:  # tiny batches: every path pages
        yield s


def random_coo(num_src: int, num_dst: int, num_edges: int, seed: int = 0) -> tuple:
    gen = torch.Generator().manual_seed(seed)
    return (torch.randint(num_src, (num_edges,), generator=gen),
            torch.randint(num_dst, (num_edges,), generator=gen))  # fmt: skip


def test_three_layouts_of_one_graph_are_read_back_as_put(store: Neo4jGraphStore) -> None:
    coo = (torch.tensor([0, 1]), torch.tensor([1, 2]))
    csr = (torch.tensor([0, 1, 2, 2]), torch.tensor([1, 2]))
    csc = (torch.tensor([0, 1]), torch.tensor([0, 0, 1, 2]))
    store.put_edge_index(coo, None, "coo", size=(3, 3))
    store.put_edge_index(csr, None, "csr", size=(3, 3))
    store.put_edge_index(csc, None, "csc", size=(3, 3))
    for layout, expected in (("coo", coo), ("csr", csr), ("csc", csc)):
        got = store.get_edge_index(None, layout)
        assert torch.equal(got[0], expected[0]) and torch.equal(got[1], expected[1]), layout
    attrs = store.get_all_edge_attrs()
    assert [(a.edge_type, a.layout.value, a.size) for a in attrs] == [
        (None, "coo", (3, 3)), (None, "csr", (3, 3)), (None, "csc", (3, 3))]  # fmt: skip
    assert store.remove_edge_index(None, "coo") is True
    assert store.remove_edge_index(None, "coo") is False
    with pytest.raises(KeyError, match="coo"):
        store.get_edge_index(None, "coo")
    assert torch.equal(store.get_edge_index(None, "csr")[1], csr[1])


def test_layouts_derived_from_one_edge_list_match_pyg_conversions(store: Neo4jGraphStore) -> None:
    row, col = random_coo(20, 30, 101)
    store.put_edge_index((row, col), WRITES, "coo", size=(20, 30))
    (csc_row,), (colptr,), _ = (d.values() for d in store.csc())  # PyG converts the COO
    (rowptr,), (csr_col,), _ = (d.values() for d in store.csr())
    store.put_edge_index((csc_row, colptr), WRITES, "csc", size=(20, 30))
    store.put_edge_index((rowptr, csr_col), WRITES, "csr", size=(20, 30))
    assert [a.layout.value for a in store.get_all_edge_attrs()] == ["coo", "csr", "csc"]
    got_row, got_colptr = store.get_edge_index(WRITES, "csc")
    assert torch.equal(got_colptr, colptr)
    assert torch.equal(got_row, row[torch.sort(col, stable=True).indices])  # ties: edge-id order
    got_rowptr, got_col = store.get_edge_index(WRITES, "csr")
    assert torch.equal(got_rowptr, rowptr)
    assert torch.equal(got_col, col[torch.sort(row, stable=True).indices])
    assert torch.equal(store.get_edge_index(WRITES, "coo")[0], row)  # edge ids unchanged


def test_short_csr_pointer_is_padded_to_the_size(store: Neo4jGraphStore) -> None:
    store.put_edge_index((torch.tensor([0, 1, 2]), torch.tensor([1, 2])), None, "csr", size=(4, 4))
    assert torch.equal(store.get_edge_index(None, "csr")[0], torch.tensor([0, 1, 2, 2, 2]))


def test_csc_put_gives_edge_ids_as_csc_positions(store: Neo4jGraphStore) -> None:
    row, colptr = torch.tensor([2, 0, 1, 0], dtype=torch.int32), torch.tensor([0, 0, 2, 4])
    store.put_edge_index((row, colptr), ("a", "to", "b"), "csc", size=(3, 3))
    chunks = list(store.iter_edge_index(("a", "to", "b"), chunk_size=3))
    assert [c[0].numel() for c in chunks] == [3, 1]
    r, c, e = (torch.cat(parts) for parts in zip(*chunks))
    assert torch.equal(r, row.long()) and torch.equal(c, torch.tensor([1, 1, 2, 2]))
    assert torch.equal(e, torch.arange(4)) and e.dtype == torch.int64


def test_hetero_types_share_labels_and_relations_without_mixing(store: Neo4jGraphStore) -> None:
    types = {("user", "rates", "item"): random_coo(5, 8, 40, 1),
             ("user", "views", "item"): random_coo(5, 8, 33, 2),
             ("user", "rates", "shop"): random_coo(5, 4, 12, 3),
             ("item", "rev_rates", "user"): random_coo(8, 6, 25, 4)}  # fmt: skip
    for et, coo in types.items():
        store.put_edge_index(coo, et, "coo")
    sizes = {a.edge_type: a.size for a in store.get_all_edge_attrs()}
    assert sizes[("user", "rates", "item")] == (6, 8)  # user grew to 6 through rev_rates
    assert sizes[("user", "rates", "shop")] == (6, int(types[("user", "rates", "shop")][1].max()) + 1)
    for et, (row, col) in types.items():
        got = store.get_edge_index(et, "coo")
        assert torch.equal(got[0], row) and torch.equal(got[1], col), et


def test_iter_edge_index_streams_pages_in_edge_id_order(store: Neo4jGraphStore) -> None:
    row, col = random_coo(50, 50, 500)
    store.put_edge_index((row, col), ET, "coo", size=(50, 50))
    chunks = list(store.iter_edge_index(ET, chunk_size=64))
    assert all(c[0].numel() <= 64 for c in chunks) and len(chunks) == 8
    r, c, e = (torch.cat(parts) for parts in zip(*chunks))
    assert torch.equal(r, row) and torch.equal(c, col) and torch.equal(e, torch.arange(500))
    with pytest.raises(NotFoundError, match="not stored"):
        next(store.iter_edge_index(("paper", "cites", "author")))


def test_version_changes_on_every_write_and_survives_reopening(store: Neo4jGraphStore) -> None:
    versions = [store.version()]
    store.put_edge_index(random_coo(4, 4, 6), ET, "coo", size=(4, 4))
    versions.append(store.version())
    store.put_edge_index(store.get_edge_index(ET, "coo"), ET, "coo", size=(4, 4))
    versions.append(store.version())
    store.remove_edge_index(ET, "coo")
    versions.append(store.version())
    assert len(set(versions)) == 4
    assert Neo4jGraphStore(store.uri, store.auth).version() == versions[-1]


def test_putting_other_edges_replaces_the_edge_type(store: Neo4jGraphStore) -> None:
    store.put_edge_index(random_coo(6, 6, 20, 1), ET, "coo", size=(6, 6))
    store.put_edge_index(store.get_edge_index(ET, "coo")[::-1], ET, "coo", size=(6, 6))  # reversed
    store.put_edge_index(random_coo(6, 6, 20, 1), ET, "coo", size=(6, 6))
    (rowptr,), (col,), _ = (d.values() for d in store.csr())
    store.put_edge_index((rowptr, col), ET, "csr", size=(6, 6))  # the same edges: both kept
    assert len(store.get_all_edge_attrs()) == 2
    new = random_coo(6, 6, 9, 2)
    store.put_edge_index(new, ET, "coo", size=(6, 6))
    assert [a.layout.value for a in store.get_all_edge_attrs()] == ["coo"]
    got = store.get_edge_index(ET, "coo")
    assert torch.equal(got[0], new[0]) and torch.equal(got[1], new[1])


def test_store_pickles_without_its_driver(store: Neo4jGraphStore) -> None:
    store.put_edge_index(random_coo(4, 4, 5), ET, "coo")
    _ = store.driver
    clone = pickle.loads(pickle.dumps(store))
    assert clone._driver is None
    assert torch.equal(clone.get_edge_index(ET, "coo")[0], store.get_edge_index(ET, "coo")[0])
    clone.close()


@pytest.mark.parametrize(
    ("edge_index", "edge_type", "layout", "size", "fragment"),
    [
        (random_coo(4, 4, 3), ("paper", "x`]->() DETACH DELETE a //", "paper"), "coo", None, "cannot be a Neo4j name"),
        (random_coo(4, 4, 3), ("1paper", "cites", "paper"), "coo", None, "cannot be a Neo4j name"),
        (random_coo(4, 4, 3), ["paper", "cites", "paper"], "coo", None, "tuple"),
        ((torch.tensor([0.0]), torch.tensor([1.0])), ET, "coo", None, "int32 or int64"),
        ((torch.tensor([0, 1]), torch.tensor([1])), ET, "coo", None, "row has 2 ids but col has 1"),
        ((torch.tensor([[0, 1]]), torch.tensor([[1, 0]])), ET, "coo", None, "1-D"),
        ((torch.tensor([0, 5]), torch.tensor([1, 0])), ET, "coo", (4, 4), "source id 5"),
        ((torch.tensor([0, -1]), torch.tensor([1, 0])), ET, "coo", None, "source id -1"),
        ((torch.tensor([0, 2, 1, 2]), torch.tensor([1, 0])), ET, "csr", None, "never decrease"),
        ((torch.tensor([0, 1, 3]), torch.tensor([1, 0])), ET, "csr", None, "end at the number of edges 2"),
        ((torch.tensor([1, 0]), torch.tensor([0, 1, 2])), ET, "csc", (2, 1), "colptr has 3 entries"),
        (torch.tensor([[0, 1], [1, 0]]), ET, "coo", None, "pair of tensors"),
    ],
)
def test_bad_input_is_refused_and_changes_nothing(
    store: Neo4jGraphStore, edge_index: object, edge_type: object, layout: str, size: tuple | None, fragment: str
) -> None:
    kept = random_coo(4, 4, 10)
    store.put_edge_index(kept, ET, "coo", size=(4, 4))
    before = store.version()
    with pytest.raises(InvalidRequestError, match=fragment.replace("[", r"\[").replace("(", r"\(")):
        store.put_edge_index(edge_index, edge_type, layout, size=size)
    assert store.version() == before
    got = store.get_edge_index(ET, "coo")
    assert torch.equal(got[0], kept[0]) and torch.equal(got[1], kept[1])
    with GraphDatabase.driver(store.uri, auth=store.auth) as driver:
        count = driver.execute_query("MATCH ()-[r]->() RETURN count(r) AS n").records[0]["n"]
    assert count == 10


def test_unknown_edge_type_and_layout_raise_key_errors(store: Neo4jGraphStore) -> None:
    store.put_edge_index(random_coo(3, 3, 4), ET, "coo")
    with pytest.raises(KeyError, match="not stored"):
        store.get_edge_index(("paper", "cites", "venue"), "coo")
    with pytest.raises(KeyError, match="no 'csc' layout"):
        store.get_edge_index(ET, "csc")
    assert store.remove_edge_index(("paper", "cites", "venue"), "coo") is False
