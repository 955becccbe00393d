"""A prepared data directory on a read-only mount: served with --read-only, and writers get one
error line that advises nothing destructive. Bind mounts need root (CI's machines run as root)."""
from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import warm_launcher
from served import ServerProcess, ingest
from torch_geometric.data import Data
from torch_geometric.sampler import NodeSamplerInput

from gnnstore.client import RemoteNeighborSampler, connect
from gnnstore.ingest.generator import generate_graph


@pytest.fixture(scope="module")
def graph() -> Data:
    return generate_graph(300, 5.0, 8, 3, seed=6)


@pytest.fixture(scope="module")
def read_only_dir(graph: Data, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A data directory prepared (snapshot and feature tier built), then bind-mounted read-only."""
    folder = tmp_path_factory.mktemp("ro-mount")
    data_dir = ingest(graph, folder / "data")
    prepared = _gnnstore("snapshot", "prepare", "--data-dir", str(data_dir))
    assert prepared.returncode == 0 and prepared.stdout.startswith(f"prepared {data_dir} | snapshot "), prepared.stderr
    assert "300 nodes" in prepared.stdout
    mount = folder / "mounted"
    mount.mkdir()
    done = subprocess.run(["mount", "--bind", "-o", "ro", str(folder), str(mount)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot bind-mount read-only here ({done.stderr.strip()}); needs root")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def _gnnstore(*args: str) -> subprocess.CompletedProcess:
    return warm_launcher.run([sys.executable, "-m", "gnnstore", *args], capture_output=True, text=True, timeout=300)


def test_a_prepared_directory_on_a_read_only_mount_is_served(read_only_dir: Path, graph: Data, tmp_path: Path) -> None:
    with ServerProcess(read_only_dir / "data", "--read-only", log=tmp_path / "serve.log") as server:
        fs, _ = connect(server.address)
        sampler = RemoteNeighborSampler(fs, [3], feature_store=fs)
        out = sampler.sample_from_nodes(NodeSamplerInput(input_id=None, node=torch.arange(10)))
        assert torch.equal(fs.get_tensor(group_name=None, attr_name="x", index=out.node), graph.x[out.node])


def test_writers_on_a_read_only_mount_get_one_line_advising_nothing_destructive(read_only_dir: Path) -> None:
    for args in (
        ("ingest", "generate", "--nodes", "100", "--data-dir", str(read_only_dir / "new")),
        ("ingest", "generate", "--nodes", "100", "--data-dir", str(read_only_dir / "data")),
        ("serve", "--data-dir", str(read_only_dir / "data"), "--port", "0"),
    ):
        done = _gnnstore(*args)
        assert done.returncode == 1, done.stderr
        assert "Traceback" not in done.stderr, done.stderr
        errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and "Read-only file system" in errors[0], done.stderr
        assert "gnnstore ingest" not in errors[0]  # re-ingesting would rebuild a healthy store
