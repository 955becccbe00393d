"""The embedded graph stores (a graph database, edge files): the graph-store contract plus
persistence across processes and crash safety.

A process loads one graph engine (``stores/graph_engines.py``): these tests run the database on
``GNNSTORE_TEST_ENGINE`` (default LadybugDB), and ``tests/stores/test_graph_engines.py`` runs
this module again, in a child pytest, on the other engine."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch
import warm_launcher
from graph_store_contract import HETERO, GraphStoreContract, random_coo, stored_edges

from gnnstore.common.errors import PreconditionError
from gnnstore.stores.edge_file_graph_store import EdgeFileGraphStore
from gnnstore.stores.embedded_graph_store import EmbeddedGraphStore
from gnnstore.stores.graph_engines import DEFAULT_ENGINE, engine_named
from gnnstore.stores.pyg_graph_store import PyGGraphStore

ENGINE = engine_named(os.environ.get("GNNSTORE_TEST_ENGINE", DEFAULT_ENGINE.name))


class OnTheEngine(PyGGraphStore):
    """PyG's API over the embedded database store on the engine under test (a class, for the
    tests that start a process and name the store they open there)."""

    def __init__(self, path: str | os.PathLike, *, read_only: bool = False) -> None:
        super().__init__(EmbeddedGraphStore(path, engine=ENGINE, read_only=read_only))


class EdgeFiles(PyGGraphStore):
    """PyG's API over the edge-file store."""

    def __init__(self, path: str | os.PathLike, *, read_only: bool = False) -> None:
        super().__init__(EdgeFileGraphStore(path, read_only=read_only))


def _in_child(kind: type[PyGGraphStore]) -> str:
    """Source that makes ``Store`` the store class ``kind`` stands for, in a child process."""
    if kind is OnTheEngine:
        made = f"EmbeddedGraphStore(path, engine={ENGINE.name!r}, **kw)"
        source = "from gnnstore.stores.embedded_graph_store import EmbeddedGraphStore\n"
    else:
        made, source = "EdgeFileGraphStore(path, **kw)", "from gnnstore.stores.edge_file_graph_store import EdgeFileGraphStore\n"
    return (source + "from gnnstore.stores.pyg_graph_store import PyGGraphStore\n"
            f"def Store(path, **kw):\n    return PyGGraphStore({made})\n")


EMBEDDED = pytest.mark.parametrize("kind", [OnTheEngine, EdgeFiles], ids=[ENGINE.name, "edge-files"])


class TestEmbeddedGraphStore(GraphStoreContract):
    def make_store(self, tmp_path: Path) -> PyGGraphStore:
        return OnTheEngine(tmp_path / ENGINE.file_name)


class TestEdgeFileGraphStore(GraphStoreContract):
    def make_store(self, tmp_path: Path) -> PyGGraphStore:
        return EdgeFiles(tmp_path / "graph.edges")


def test_streaming_pages_hold_edge_id_order(tmp_path: Path) -> None:
    with OnTheEngine(tmp_path / ENGINE.file_name) as store:
        store.store.page_edges = 64  # force several paged range queries
        row, col = random_coo(50, 50, 1000)
        store.put_edge_index((row, col), None, "coo", size=(50, 50))
        chunks = list(store.iter_edge_index(None, chunk_size=30))
        assert max(c[0].numel() for c in chunks) == 30
        r, c, e_id = (torch.cat(parts) for parts in zip(*chunks))
        assert torch.equal(e_id, torch.arange(1000)) and torch.equal(r, row) and torch.equal(c, col)


@EMBEDDED
def test_reopen_in_a_new_process_gives_the_same_edges(tmp_path: Path, kind: type[PyGGraphStore]) -> None:
    path = tmp_path / "graph"
    with kind(path) as store:
        for i, (et, size) in enumerate(HETERO.items()):
            store.put_edge_index(random_coo(*size, 50, seed=i), et, "coo", size=size)
        store.put_edge_index(random_coo(9, 9, 20), None, "coo", size=(9, 9))
        before, version = stored_edges(store), store.version()
    saved = tmp_path / "saved.pt"
    code = ("import sys, torch\n"
            "from graph_store_contract import stored_edges\n"
            + _in_child(kind)
            + "s = Store(sys.argv[1], read_only=True)\n"
            "streamed = {a.edge_type: [torch.cat(p) for p in zip(*s.iter_edge_index(a.edge_type, 7))]"
            " for a in s.get_all_edge_attrs()}\n"
            "torch.save((stored_edges(s), s.version(), streamed), sys.argv[2])")
    warm_launcher.run([sys.executable, "-c", code, str(path), str(saved)], check=True, timeout=120,
                   cwd=Path(__file__).parent)
    after, got_version, streamed = torch.load(saved)
    assert got_version == version
    assert after.keys() == before.keys()
    for key, (tensors, size, is_sorted) in before.items():
        assert after[key][1:] == (size, is_sorted)
        assert all(torch.equal(a, b) for a, b in zip(tensors, after[key][0]))
        row, col, e_id = streamed[key[0]]
        assert torch.equal(row, tensors[0]) and torch.equal(col, tensors[1])
        assert torch.equal(e_id, torch.arange(row.numel()))


@EMBEDDED
def test_read_only_refuses_writes(tmp_path: Path, kind: type[PyGGraphStore]) -> None:
    path = tmp_path / "graph"
    with kind(path) as store:
        store.put_edge_index(random_coo(3, 3, 4), None, "coo", size=(3, 3))
    with kind(path, read_only=True) as store:
        with pytest.raises(PreconditionError, match="read-only"):
            store.put_edge_index(random_coo(3, 3, 4), None, "coo", size=(3, 3))
        assert len(store.get_all_edge_attrs()) == 1
    with pytest.raises(PreconditionError, match="does not exist"):
        kind(tmp_path / "nowhere", read_only=True)


WRITER = """
import sys, torch
{store}
s = Store(sys.argv[1])
k = 1
while True:
    n = 200000 + k
    s.put_edge_index((torch.full((n,), k), torch.arange(n) % 1000), ("a", "r", "b"), "coo")
    print(k, flush=True)
    k += 1
"""


@EMBEDDED
def test_killed_writer_leaves_a_whole_previous_state(tmp_path: Path, kind: type[PyGGraphStore]) -> None:
    path = tmp_path / "graph"
    with kind(path) as store:
        store.put_edge_index((torch.zeros(5, dtype=torch.long), torch.arange(5)), ("a", "r", "b"),
                             "coo")
    writer = WRITER.format(store=_in_child(kind))
    proc = warm_launcher.popen([sys.executable, "-c", writer, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "1"
        time.sleep(0.4)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    with kind(path) as store:
        (attr,) = store.get_all_edge_attrs()
        row, col = store.get_edge_index(("a", "r", "b"), "coo")
        k = int(row[0])
        assert k >= 1 and row.numel() == 200000 + k  # one whole put: its length names it
        assert torch.equal(row, torch.full_like(row, k))
        assert torch.equal(col, torch.arange(row.numel()) % 1000)
        assert tuple(attr.size) == (k + 1, 1000)


def test_rel_table_of_an_unfinished_put_is_dropped_on_writable_open(tmp_path: Path) -> None:
    path = tmp_path / ENGINE.file_name
    with OnTheEngine(path) as store:
        store.put_edge_index((torch.zeros(3, dtype=torch.long), torch.arange(3)), ("a", "r", "b"),
                             "coo")
        (named,) = store.store._table_names("REL")
        node_tables = sorted(store.store._table_names("NODE") - {"gnnstore_meta"})
    db = ENGINE.module().Database(str(path))  # what a put killed after its COPY transaction leaves behind
    conn = ENGINE.module().Connection(db)
    conn.execute(f"CREATE REL TABLE r99_r(FROM {node_tables[0]} TO {node_tables[1]}, e_id INT64)")
    conn.close()
    db.close()
    with OnTheEngine(path, read_only=True) as store:
        assert store.store._table_names("REL") == {named, "r99_r"}  # a reader changes nothing
    with OnTheEngine(path) as store:
        assert store.store._table_names("REL") == {named}
        row, col = store.get_edge_index(("a", "r", "b"), "coo")
        assert row.tolist() == [0, 0, 0] and col.tolist() == [0, 1, 2]


def test_edge_files_of_an_unfinished_put_are_removed_on_writable_open(tmp_path: Path) -> None:
    path = tmp_path / "graph.edges"
    with EdgeFiles(path) as store:
        store.put_edge_index((torch.zeros(3, dtype=torch.long), torch.arange(3)), ("a", "r", "b"), "coo")
        named = sorted(p.name for p in path.glob("e*.npy"))
    for side in ("row", "col"):  # what a put killed before its switch leaves behind
        (path / f"e99.{side}.npy").write_bytes(b"partial")
    with EdgeFiles(path, read_only=True) as store:
        assert len(list(path.glob("e*.npy"))) == 4  # a reader changes nothing
    with EdgeFiles(path) as store:
        assert sorted(p.name for p in path.glob("e*.npy")) == named
        row, col = store.get_edge_index(("a", "r", "b"), "coo")
        assert row.tolist() == [0, 0, 0] and col.tolist() == [0, 1, 2]


def test_edge_files_take_one_writer_at_a_time(tmp_path: Path) -> None:
    path = tmp_path / "graph.edges"
    with EdgeFiles(path) as store:
        store.put_edge_index(random_coo(4, 4, 10), None, "coo", size=(4, 4))
        code = f"from gnnstore.stores.edge_file_graph_store import EdgeFileGraphStore as S\nS({str(path)!r})"
        other = warm_launcher.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        assert other.returncode != 0 and "open for writing by another process" in other.stderr
        with EdgeFiles(path, read_only=True) as reader:  # readers need no lock
            assert reader.version() == store.version()
    with EdgeFiles(path) as store:  # closing let go of the lock
        assert len(store.get_all_edge_attrs()) == 1


def test_replaced_edge_files_go_and_a_reader_keeps_its_version(tmp_path: Path) -> None:
    path = tmp_path / "graph.edges"
    with EdgeFiles(path) as store:
        store.put_edge_index(random_coo(5, 5, 30, seed=1), None, "coo", size=(5, 5))
        reader = EdgeFiles(path, read_only=True)
        chunks = reader.iter_edge_index(None, 10)
        first = next(chunks)
        store.put_edge_index(random_coo(5, 5, 40, seed=2), None, "coo", size=(5, 5))
        assert len(list(path.glob("e*.npy"))) == 2  # the old files are gone
        rest = list(chunks)  # a scan begun before the switch still reads the edges it began with
        row = torch.cat([first[0], *(c[0] for c in rest)])
        assert torch.equal(row, random_coo(5, 5, 30, seed=1)[0])
        reader.close()


def test_edge_files_take_puts_from_several_threads_at_once(tmp_path: Path) -> None:
    path = tmp_path / "graph.edges"
    edges = {("n", f"r{i}", "n"): random_coo(20, 20, 100 + i, seed=i) for i in range(8)}
    with EdgeFiles(path) as store, ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda item: store.put_edge_index(item[1], item[0], "coo", size=(20, 20)), edges.items()))
        assert store.version().endswith("-8")  # every put switched once
    with EdgeFiles(path, read_only=True) as store:
        assert {attr.edge_type for attr in store.get_all_edge_attrs()} == set(edges)
        for edge_type, (row, col) in edges.items():
            got = store.get_edge_index(edge_type, "coo")
            assert torch.equal(got[0], row) and torch.equal(got[1], col)
        assert len(list(path.glob("e*.npy"))) == 16


def test_damaged_edge_files_are_named_not_read(tmp_path: Path) -> None:
    path = tmp_path / "graph.edges"
    with EdgeFiles(path) as store:
        store.put_edge_index(random_coo(5, 5, 30), None, "coo", size=(5, 5))
    (row_file,) = path.glob("e*.row.npy")
    row_file.write_bytes(row_file.read_bytes()[:-8])  # one edge short
    with EdgeFiles(path, read_only=True) as store:
        with pytest.raises(PreconditionError, match=r"the edge files e\d+\.\* are damaged"):
            list(store.iter_edge_index(None))
    (path / "meta.json").write_text("{not json")
    with pytest.raises(PreconditionError, match="meta.json is unreadable"):
        EdgeFiles(path, read_only=True)


def test_a_reader_whose_edge_files_were_replaced_is_told_to_open_again(tmp_path: Path) -> None:
    path = tmp_path / "graph.edges"
    with EdgeFiles(path) as store:
        store.put_edge_index(random_coo(5, 5, 30), None, "coo", size=(5, 5))
        with EdgeFiles(path, read_only=True) as reader:
            store.put_edge_index(random_coo(5, 5, 40), None, "coo", size=(5, 5))
            with pytest.raises(PreconditionError, match="are gone: a writer replaced them; open the store again"):
                reader.get_edge_index(None, "coo")
        with EdgeFiles(path, read_only=True) as reader:
            assert reader.get_edge_index(None, "coo")[0].numel() == 40
