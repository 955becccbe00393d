"""RocksDBFeatureStore: the FeatureStore contract plus persistence, versions and crash safety."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import torch
import warm_launcher
from feature_store_contract import FeatureStoreContract, sample_tensor

from gnnstore.common.attr_schema import AttrSchema
from gnnstore.common.errors import PreconditionError
from gnnstore.stores import rocksdb_rows
from gnnstore.stores.rocksdb_feature_store import RocksDBFeatureStore


class TestRocksDBFeatureStore(FeatureStoreContract):
    def make_store(self, tmp_path: Path) -> RocksDBFeatureStore:
        return RocksDBFeatureStore(tmp_path / "features")


def run_python(code: str, *args: str) -> str:
    """Run ``code`` in a fresh interpreter and return its stdout."""
    out = warm_launcher.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_reopen_in_a_new_process_is_bit_identical(tmp_path: Path) -> None:
    path = tmp_path / "features"
    tensors = {("paper", "x"): sample_tensor(torch.bfloat16, (5000, 3)),
               (None, "y"): sample_tensor(torch.bool, (7,)),
               ("author", "z"): sample_tensor(torch.float64, (3, 2, 2))}
    with RocksDBFeatureStore(path) as store:
        for (group, attr), x in tensors.items():
            store.put_tensor(x, group_name=group, attr_name=attr, index=None)
        version = store.version()
    saved = tmp_path / "saved.pt"
    run_python(
        "import sys, torch; from gnnstore.stores.rocksdb_feature_store import RocksDBFeatureStore\n"
        "s = RocksDBFeatureStore(sys.argv[1], read_only=True)\n"
        "torch.save(({(a.group_name, a.attr_name): s.get_tensor(a.group_name, a.attr_name, None)"
        " for a in s.get_all_tensor_attrs()}, s.version()), sys.argv[2])",
        str(path), str(saved),
    )
    got, got_version = torch.load(saved)
    assert got_version == version
    assert got.keys() == tensors.keys()
    for key, x in tensors.items():
        assert got[key].dtype == x.dtype
        assert torch.equal(got[key].view(torch.uint8), x.view(torch.uint8))


def test_a_whole_put_written_in_chunks_reads_back_every_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    chunk = 5000  # rows of three int32 a chunk, over _SST_MIN_ROWS in all
    monkeypatch.setattr(rocksdb_rows, "_SST_CHUNK_BYTES", chunk * 12)
    rows = torch.randint(-2**31, 2**31, (2 * chunk + 5, 3), dtype=torch.int32)
    with RocksDBFeatureStore(tmp_path / "features") as store:
        store.put_tensor(rows.t().contiguous().t(), group_name="edge", attr_name="w", index=None)  # column-major
        assert torch.equal(store.get_tensor("edge", "w", None), rows)
        edges = torch.tensor([0, chunk - 1, chunk, 2 * chunk, 2 * chunk + 4])
        assert torch.equal(store.get_tensor("edge", "w", edges), rows[edges])


def test_version_changes_on_every_write_and_survives_reopen(tmp_path: Path) -> None:
    path = tmp_path / "features"
    seen = []
    with RocksDBFeatureStore(path) as store:
        seen.append(store.version())
        store.put_tensor(torch.zeros(3, 2), group_name="paper", attr_name="x", index=None)
        seen.append(store.version())
        store.put_tensor(torch.ones(1, 2), group_name="paper", attr_name="x", index=torch.tensor([1]))
        seen.append(store.version())
        store.remove_tensor(group_name="paper", attr_name="x", index=None)
        seen.append(store.version())
    assert len(set(seen)) == 4
    with RocksDBFeatureStore(path, read_only=True) as store:
        assert store.version() == seen[-1]


def test_tensor_schema_lists_dtype_and_shape(tmp_path: Path) -> None:
    with RocksDBFeatureStore(tmp_path / "f") as store:
        store.put_tensor(torch.zeros(4, 2, dtype=torch.float16), group_name="paper", attr_name="x",
                         index=None)
        store.put_tensor(torch.zeros(9, dtype=torch.int64), group_name=None, attr_name="y", index=None)
        schema = {(s.group_name, s.attr_name): s for s in store.tensor_schema()}
    assert schema == {("paper", "x"): AttrSchema("paper", "x", torch.float16, (4, 2)),
                      (None, "y"): AttrSchema(None, "y", torch.int64, (9,))}


def test_read_only_refuses_writes_and_missing_dir(tmp_path: Path) -> None:
    path = tmp_path / "f"
    with RocksDBFeatureStore(path) as store:
        store.put_tensor(torch.zeros(2, 2), group_name="paper", attr_name="x", index=None)
    with RocksDBFeatureStore(path, read_only=True) as store:
        with pytest.raises(PreconditionError, match="read-only"):
            store.put_tensor(torch.ones(2, 2), group_name="paper", attr_name="x", index=None)
        assert torch.equal(store.get_tensor("paper", "x", None), torch.zeros(2, 2))
    with pytest.raises(PreconditionError, match="does not exist"):
        RocksDBFeatureStore(tmp_path / "nowhere", read_only=True)


def test_second_writer_is_refused(tmp_path: Path) -> None:
    with RocksDBFeatureStore(tmp_path / "f"):
        with pytest.raises(PreconditionError, match="cannot open feature store"):
            RocksDBFeatureStore(tmp_path / "f")


WRITER = """
import sys, torch
from gnnstore.stores.rocksdb_feature_store import RocksDBFeatureStore
s = RocksDBFeatureStore(sys.argv[1])
k = 1
while True:
    s.put_tensor(torch.full((50000, 8), float(k)), group_name="paper", attr_name="x", index=None)
    s.put_tensor(torch.full((700, 8), float(k)), group_name="paper", attr_name="x",
                 index=torch.arange(100, 800))
    print(k, flush=True)
    k += 1
"""


def test_killed_writer_leaves_a_whole_previous_state(tmp_path: Path) -> None:
    path = tmp_path / "f"
    with RocksDBFeatureStore(path) as store:
        store.put_tensor(torch.zeros(50000, 8), group_name="paper", attr_name="x", index=None)
    proc = warm_launcher.popen([sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout.readline().strip() == "1"
        time.sleep(0.3)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    with RocksDBFeatureStore(path) as store:  # a writer's open sweeps half-done bulk loads
        x = store.get_tensor("paper", "x", None)
        assert x.shape == (50000, 8)
        assert len(torch.unique(x)) == 1  # every put writes one value: a mix is a torn write
    assert list(path.glob("ingest-*.sst")) == []


def test_a_follower_sees_the_writers_rows_and_attributes_after_catching_up(tmp_path: Path) -> None:
    with RocksDBFeatureStore(tmp_path / "f") as writer:
        writer.put_tensor(torch.zeros(4, 2), group_name="paper", attr_name="x", index=None)
        with RocksDBFeatureStore(tmp_path / "f", follow=True) as follower:
            writer.put_tensor(torch.ones(1, 2), group_name="paper", attr_name="x", index=torch.tensor([2]))
            writer.put_tensor(torch.arange(4), group_name="paper", attr_name="y", index=None)
            assert follower.version() != writer.version() and len(follower.tensor_schema()) == 1
            follower.catch_up()
            assert follower.version() == writer.version()
            assert [s.attr_name for s in follower.tensor_schema()] == ["x", "y"]
            assert torch.equal(follower.get_tensor(group_name="paper", attr_name="x", index=None)[2], torch.ones(2))
            with pytest.raises(PreconditionError, match="read-only"):
                follower.put_tensor(torch.ones(1, 2), group_name="paper", attr_name="x", index=torch.tensor([0]))


def test_a_followers_log_folder_goes_when_it_closes_and_one_a_killed_process_left_with_the_next(tmp_path: Path) -> None:
    """A follower's RocksDB log folder goes when it closes (it used to stay until the process
    exited), and one a SIGKILL left is removed by the next follower."""
    temp = Path(tempfile.gettempdir())
    no_such_pid = int(Path("/proc/sys/kernel/pid_max").read_text()) + 1
    killed, alive = temp / f"gnnstore-secondary-{no_such_pid}-x1", temp / f"gnnstore-secondary-{os.getppid()}-x2"
    for folder in (killed, alive):
        folder.mkdir()
    ours = f"gnnstore-secondary-{os.getpid()}-*"
    before = set(temp.glob(ours))
    try:
        with RocksDBFeatureStore(tmp_path / "f") as writer:
            writer.put_tensor(torch.zeros(4, 2), group_name="paper", attr_name="x", index=None)
            for _ in range(3):  # as a replica waiting for its primary opens and closes them
                with RocksDBFeatureStore(tmp_path / "f", follow=True):
                    assert not killed.exists() and alive.exists()  # another live process's stays
                    assert len(set(temp.glob(ours)) - before) == 1  # its own names its pid
                assert set(temp.glob(ours)) == before, "a closed follower left its folder"
    finally:
        shutil.rmtree(alive, ignore_errors=True)
