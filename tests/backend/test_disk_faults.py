"""A full filesystem is an error naming the space needed, never SIGBUS; a Put that finds the disk
full answers RESOURCE_EXHAUSTED and the server keeps serving what it had.

The small filesystems are tmpfs mounts, which need root (CI's machines run as root)."""
from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
import warm_launcher
from served import ServerProcess, ingest

from gnnstore.client import GraphWriter, connect
from gnnstore.common.disk import preallocated_npy
from gnnstore.common.errors import ResourceExhaustedError
from gnnstore.ingest.generator import generate_graph
from gnnstore.proto import admin_pb2
from gnnstore.stores.edge_file_graph_store import EdgeFileGraphStore
from gnnstore.stores.id_map import IdMap


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Callable[[int], Path]]:
    """Mounts tmpfs filesystems of a given size in bytes; unmounts them afterwards."""
    mounted: list[Path] = []

    def mount(size: int) -> Path:
        point = tmp_path / f"disk{len(mounted)}"
        point.mkdir()
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(point)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a small tmpfs here ({done.stderr.strip()}); needs root")
        mounted.append(point)
        return point

    yield mount
    for point in mounted:
        subprocess.run(["umount", "-l", str(point)], check=False)


def _fill(folder: Path, leave: int) -> None:
    """Take all but about ``leave`` bytes of ``folder``'s filesystem."""
    free = _free(folder)
    with open(folder / "filler", "wb") as filler:
        filler.truncate(0)
        chunk = b"\0" * (1 << 20)
        while (free := _free(folder)) > leave + len(chunk):
            filler.write(chunk)
            filler.flush()
        filler.write(b"\0" * max(0, free - leave))


def _free(folder: Path) -> int:
    import os

    stat = os.statvfs(folder)
    return stat.f_bavail * stat.f_frsize


def test_a_memory_map_that_does_not_fit_is_an_error_not_sigbus(small_disk: Callable[[int], Path]) -> None:
    disk = small_disk(1 << 20)
    with pytest.raises(ResourceExhaustedError, match=r"no space left on .*need 4,198,400 bytes"):
        preallocated_npy(disk / "big.npy", np.dtype(np.float32), (1 << 20,))
    assert not (disk / "big.npy").exists()
    fits = preallocated_npy(disk / "small.npy", np.dtype(np.float32), (1000,))
    fits[:] = 1.0  # reserved: writing cannot fault
    assert float(fits.sum()) == 1000.0


def test_start_up_on_a_full_disk_exits_with_a_message(small_disk: Callable[[int], Path]) -> None:
    disk = small_disk(64 << 20)
    data_dir = ingest(generate_graph(3000, 8.0, 16, 3, seed=4), disk / "data")
    _fill(disk, leave=16 << 10)
    done = warm_launcher.run(
        [sys.executable, "-m", "gnnstore", "serve", "--data-dir", str(data_dir), "--port", "0", "--read-only"],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 1, done.stderr  # not -7 (SIGBUS)
    assert "error: no space left on" in done.stderr and " bytes" in done.stderr
    assert "Traceback" not in done.stderr
    (disk / "filler").unlink()
    with ServerProcess(data_dir, "--read-only", log=disk.parent / "serve.log") as server:  # the next start
        assert server.address
    assert not list((data_dir / "snapshots").glob(".building-*"))  # swept or never left


def test_a_put_on_a_full_disk_is_refused_and_the_server_keeps_serving(small_disk: Callable[[int], Path]) -> None:
    disk = small_disk(96 << 20)
    graph = generate_graph(2000, 6.0, 8, 3, seed=4)
    data_dir = ingest(graph, disk / "data")
    with ServerProcess(data_dir, log=disk.parent / "serve.log") as server:
        fs, _ = connect(server.address, shared_memory=False)
        _fill(disk, leave=256 << 10)
        with pytest.raises(ResourceExhaustedError, match="no space left") as refused:
            fs.put_tensor(torch.ones(2000, 2048), group_name=None, attr_name="wide", index=None)
        assert "/" not in str(refused.value)  # no server path in a client's error
        assert server.proc.poll() is None
        assert torch.equal(fs.get_tensor(group_name=None, attr_name="x", index=torch.arange(50)), graph.x[:50])
        assert "wide" not in {s.attr_name for s in fs.schema(refresh=True)}


def test_edge_files_that_do_not_fit_are_an_error_and_keep_the_old_edges(small_disk: Callable[[int], Path]) -> None:
    disk = small_disk(1 << 20)
    with EdgeFileGraphStore(disk / "graph.edges") as store:
        store.put_edges((torch.zeros(1000, dtype=torch.long), torch.arange(1000)), None, "coo", (1, 1000))
        version = store.version()
        big = torch.arange(100_000)
        with pytest.raises(ResourceExhaustedError, match=r"no space left for the 100,000 edges .*need 1,600,000"):
            store.put_edges((big % 7, big), None, "coo", (7, 100_000))
        assert store.version() == version
        row, col = store.edge_index(None, "coo")
        assert col.tolist() == list(range(1000)) and not row.any()
        assert len(list((disk / "graph.edges").glob("e*.npy"))) == 2  # the part written is gone


def test_a_graph_write_on_a_full_disk_is_refused_the_server_recovers_and_stops_cleanly(
    small_disk: Callable[[int], Path]
) -> None:
    """It answered INTERNAL, node writes kept failing after space was freed (the id map's RocksDB
    kept its background error), and SIGTERM then died in the id map's flush."""
    disk = small_disk(96 << 20)
    graph = generate_graph(2000, 6.0, 8, 3, seed=4)
    data_dir = ingest(graph, disk / "data")
    server = ServerProcess(data_dir, log=disk.parent / "serve.log")
    try:
        fs, _ = connect(server.address, shared_memory=False)
        writer = GraphWriter(fs)
        _fill(disk, leave=64 << 10)
        keys = torch.arange(10_000_000, 10_200_000)
        edges = (torch.randint(2000, (300_000,)), torch.randint(2000, (300_000,)))
        def rows(count: int) -> dict:  # a row of every attribute per new node
            return {None: {s.attr_name: torch.zeros((count, *s.shape[1:]), dtype=getattr(torch, s.dtype)) for s in fs.schema()
                           if s.group_name is None}}

        with pytest.raises(ResourceExhaustedError, match="no space left") as refused:
            writer.write(nodes={None: keys}, rows=rows(len(keys)), add_edges={None: edges})
        assert "/" not in str(refused.value)  # no server path in a client's error
        assert fs.connection.call("AdminService", "Info", admin_pb2.InfoRequest()).graph_version == 0
        (disk / "filler").unlink()
        done = writer.write(nodes={None: keys[:10]}, rows=rows(10),
                            add_edges={None: (torch.tensor([0]), torch.tensor([1]))})
        assert done.version == 1 and done.node_ids[None].tolist() == list(range(2000, 2010))
        fs.connection.close()
    finally:
        code = server.stop()
    log = (disk.parent / "serve.log").read_text()
    assert code == 0 and "Traceback" not in log, log[-3000:]


def test_the_id_map_takes_writes_again_once_space_is_freed_and_closes_cleanly(
    small_disk: Callable[[int], Path]
) -> None:
    """RocksDB keeps a failed write's error: every later write failed until the map was reopened."""
    disk = small_disk(32 << 20)
    id_map = IdMap(disk / "idmap")
    assert id_map.map_keys("user", [f"u{i}" for i in range(100)]).tolist() == list(range(100))
    _fill(disk, leave=16 << 10)
    with pytest.raises(ResourceExhaustedError, match="no space left"):
        for start in range(100, 2_000_100, 200_000):  # until the WAL no longer fits
            id_map.map_keys("user", [f"u{i}-{'x' * 64}" for i in range(start, start + 200_000)])
    known = id_map.num_nodes("user")
    (disk / "filler").unlink()
    assert id_map.map_keys("user", ["new"]).tolist() == [known]
    assert id_map.to_keys("user", [0, known]) == ["u0", "new"]
    id_map.close()  # no flush error left to raise
    reopened = IdMap(disk / "idmap")
    assert reopened.to_ids("user", ["u0", "new"]).tolist() == [0, known]
    reopened.close()
