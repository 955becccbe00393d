"""Graph versions over a write log: every version equals a snapshot built from scratch of the
edges alive in it, survives a restart, and a refused write leaves no trace."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from gnnstore.backend.engine.topology import TopologySnapshot
from gnnstore.backend.versions.graph_versions import EdgeWrite, GraphVersions
from gnnstore.backend.versions.write_log import WriteLog
from gnnstore.common.errors import InvalidRequestError, NotFoundError, PreconditionError, ServerUnavailableError

ET = ("user", "rates", "item")


def base_graph(seed: int = 0) -> tuple[TopologySnapshot, np.ndarray]:
    g = torch.Generator().manual_seed(seed)
    edges = torch.stack([torch.randint(0, 40, (300,), generator=g), torch.randint(0, 30, (300,), generator=g)])
    back = torch.stack([torch.randint(0, 30, (50,), generator=g), torch.randint(0, 40, (50,), generator=g)])
    snapshot = TopologySnapshot.from_edge_index(
        {ET: edges, ("item", "rev", "user"): back}, {"user": 40, "item": 30}, version="v1", csr=True
    )
    coo = np.stack([edges[0].numpy(), edges[1].numpy(), np.arange(300)], 1)
    return snapshot, coo


def expected(alive: np.ndarray, num_src: int, num_dst: int) -> TopologySnapshot:
    """The CSC and CSR a from-scratch build makes of ``alive`` (src, dst, e_id) rows."""
    def side(keys: np.ndarray, values: np.ndarray, e_id: np.ndarray, n: int) -> tuple:
        order = np.lexsort((e_id, keys))
        ptr = np.zeros(n + 1, np.int64)
        np.cumsum(np.bincount(keys, minlength=n), out=ptr[1:])
        return ptr, values[order], e_id[order]
    src, dst, e_id = alive.T
    return side(dst, src, e_id, num_dst), side(src, dst, e_id, num_src)


def check(topo: object, alive: np.ndarray, num_src: int, num_dst: int) -> None:
    (colptr, row, csc_e), (rowptr, col, csr_e) = expected(alive, num_src, num_dst)
    assert (topo.num_src, topo.num_dst) == (num_src, num_dst)
    for got, want in ((topo.colptr, colptr), (topo.row, row), (topo.e_id, csc_e),
                      (topo.rowptr, rowptr), (topo.col, col), (topo.csr_e_id, csr_e)):
        assert np.array_equal(np.asarray(got), want)


def write(versions: GraphVersions, counts: dict, changes: dict) -> int:
    with versions.write_lock:
        return versions.commit(versions.prepare(counts, changes)).graph_version


def ids(*values: int) -> np.ndarray:
    return np.array(values, np.int64)


def test_each_version_is_the_graph_built_from_scratch_and_survives_a_restart(tmp_path: Path) -> None:
    base, alive = base_graph()
    versions = GraphVersions(base, WriteLog(tmp_path / "log", base.version))
    rng = np.random.default_rng(1)
    history, users, next_e = [alive.copy()], 40, 300
    for step in range(6):
        users += step % 2  # every other write adds a user
        add = rng.integers(0, [users, 30], size=(20, 2))
        gone = rng.choice(alive[:, 2], size=15, replace=False)
        version = write(versions, {"user": users}, {ET: EdgeWrite(add[:, 0], add[:, 1], gone)})
        assert version == step + 1
        alive = alive[~np.isin(alive[:, 2], gone)]
        alive = np.concatenate([alive, np.c_[add, np.arange(next_e, next_e + 20)]])
        next_e += 20
        history.append(alive.copy())
    for v, edges in enumerate(history):
        view = versions.view(v)
        counts = view.snapshot.num_nodes
        check(view.snapshot.edges[ET], edges, counts["user"], counts["item"])
        rev = view.snapshot.edges[("item", "rev", "user")]  # untouched, but its users grew
        assert rev.num_edges == 50 and rev.colptr.shape == (counts["user"] + 1,) and rev.colptr[-1] == 50
        assert rev.rowptr.shape == (31,) and np.array_equal(rev.row, base.edges[("item", "rev", "user")].row)
        assert view.bounds.num_edges[ET] == len(edges)
    assert versions.view(6).snapshot.num_nodes == {"user": 43, "item": 30}

    restarted = GraphVersions(base, WriteLog(tmp_path / "log", base.version), max_views=2)
    assert restarted.newest == 6
    for v in (6, 0, 3, 5, 1, 6):  # more versions than it keeps built: the evicted are rebuilt
        snapshot = restarted.view(v).snapshot
        check(snapshot.edges[ET], history[v], snapshot.num_nodes["user"], 30)
    with pytest.raises(NotFoundError, match="graph version 7 does not exist"):
        restarted.view(7)


def test_a_refused_write_changes_nothing(tmp_path: Path) -> None:
    base, _ = base_graph()
    versions = GraphVersions(base, WriteLog(tmp_path / "log", base.version))
    write(versions, {}, {ET: EdgeWrite(ids(1), ids(2), ids(5))})
    bad = [
        ({}, {ET: EdgeWrite(ids(40), ids(0), ids())}, "source id 40 is out of range"),
        ({}, {ET: EdgeWrite(ids(0), ids(-1), ids())}, "destination id -1 is out of range"),
        ({}, {ET: EdgeWrite(ids(0, 1), ids(0), ids())}, "2 sources but 1 destinations"),
        ({}, {ET: EdgeWrite(ids(), ids(), ids(5))}, "edge id 5 is not in graph version 1"),
        ({}, {ET: EdgeWrite(ids(), ids(), ids(301))}, "edge id 301 is not in graph version 1"),
        ({}, {ET: EdgeWrite(ids(), ids(), ids(7, 7))}, "named twice"),
        ({}, {("user", "x", "item"): EdgeWrite(ids(), ids(), ids())}, "is not in the graph"),
        ({"shop": 3}, {}, "node type 'shop' is not in the graph"),
    ]
    for counts, changes, message in bad:
        with pytest.raises(InvalidRequestError, match=message):
            write(versions, counts, changes)
    assert versions.newest == 1
    assert sorted(p.name for p in (tmp_path / "log").iterdir()) == ["000000000001.npz", "base.json"]
    removed_added = write(versions, {}, {ET: EdgeWrite(ids(), ids(), ids(300))})  # the edge write 1 added
    assert versions.view(removed_added).snapshot.edges[ET].num_edges == 299


def test_the_log_belongs_to_its_base_and_sweeps_torn_writes(tmp_path: Path) -> None:
    base, _ = base_graph()
    folder = tmp_path / "log"
    write(GraphVersions(base, WriteLog(folder, base.version)), {}, {ET: EdgeWrite(ids(0), ids(0), ids())})
    (folder / ".000000000002.npz.part").write_bytes(b"half a write")  # killed before its rename
    assert WriteLog(folder, base.version).newest == 1
    assert not (folder / ".000000000002.npz.part").exists()
    with pytest.raises(PreconditionError, match="made over graph version v1, but the graph store is at v2"):
        WriteLog(folder, "v2")
    (folder / "000000000001.npz").write_bytes(b"not a record")
    with pytest.raises(Exception, match="not a graph write record"):
        WriteLog(folder, base.version)


def test_a_read_only_log_takes_no_write(tmp_path: Path) -> None:
    base, _ = base_graph()
    versions = GraphVersions(base, WriteLog(tmp_path / "log", base.version, read_only=True))
    with pytest.raises(PreconditionError, match="read-only"):
        write(versions, {}, {ET: EdgeWrite(ids(0), ids(0), ids())})
    assert not (tmp_path / "log").exists()


def test_removing_nodes_removes_every_edge_they_have(tmp_path: Path) -> None:
    base, alive = base_graph()
    versions = GraphVersions(base, WriteLog(tmp_path / "log", base.version))
    write(versions, {}, {ET: EdgeWrite(ids(3), ids(4), ids())})  # an added edge of user 3 goes too
    alive = np.concatenate([alive, [[3, 4, 300]]])
    back = versions.view().snapshot.edges[("item", "rev", "user")]
    with versions.write_lock:
        record = versions.prepare({}, {ET: EdgeWrite(ids(), ids(), ids(0))},
                                  {"user": ids(3, 7, 3), "item": ids(5)})
        view = versions.commit(record)
    gone = np.isin(alive[:, 0], [3, 7]) | (alive[:, 1] == 5) | (alive[:, 2] == 0)
    assert np.array_equal(record.edges[ET].remove, np.sort(alive[gone, 2]))
    check(view.snapshot.edges[ET], alive[~gone], 40, 30)
    rev_dst, rev_src = np.repeat(np.arange(40), np.diff(back.colptr)), np.asarray(back.row)
    rev_gone = np.sort(np.asarray(back.e_id)[(rev_src == 5) | np.isin(rev_dst, [3, 7])])
    assert np.array_equal(record.edges[("item", "rev", "user")].remove, rev_gone) and rev_gone.size
    with pytest.raises(InvalidRequestError, match="node 40 of 'user' cannot be removed: ids are 0..39"):
        with versions.write_lock:
            versions.prepare({}, {}, {"user": ids(40)})


def test_a_replica_adopts_the_writes_another_process_logged_and_waits_for_the_rest(tmp_path: Path) -> None:
    base, alive = base_graph()
    primary = GraphVersions(base, WriteLog(tmp_path / "log", base.version))
    replica = GraphVersions(base, WriteLog(tmp_path / "log", base.version, read_only=True), replica=True)
    write(primary, {"user": 41}, {ET: EdgeWrite(ids(40), ids(0), ids(5))})
    assert replica.newest == 0
    with pytest.raises(ServerUnavailableError, match=r"graph version 1 is not on this replica yet \(it has 0\.\.0\)"):
        replica.view(1)
    unread = replica.log.unread()
    assert [r.version for r in unread] == [1] and replica.newest == 0  # read, not yet taken
    replica.adopt(unread)
    alive = np.concatenate([alive[alive[:, 2] != 5], [[40, 0, 300]]])
    check(replica.view(1).snapshot.edges[ET], alive, 41, 30)
    assert replica.log.unread() == []
    with pytest.raises(NotFoundError):  # a negative version is no replica's to wait for
        replica.view(-1)
