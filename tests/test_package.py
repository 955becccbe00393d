"""gnnstore as a package: ``python -m build`` makes a wheel and an sdist that carry what it needs,
and the wheel, installed into a fresh virtual environment, runs the demo end to end.

The fresh environment gets only the wheel; its dependencies come from this test environment's
site-packages through a path file (installing torch anew would take minutes), so everything of
gnnstore it runs comes from the wheel, never from the source tree.
"""
from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

from served import ingest

import gnnstore
from gnnstore.ingest.generator import generate_graph

ROOT = Path(__file__).resolve().parents[1]


def test_the_wheel_installed_alone_runs_the_demo(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    # --no-isolation: the build backend is this environment's setuptools, not one downloaded again
    built = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(dist), str(ROOT)],
                           capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = dist.glob(f"gnnstore-{gnnstore.__version__}-py3-none-any.whl")
    (sdist,) = dist.glob(f"gnnstore-{gnnstore.__version__}.tar.gz")
    names = set(zipfile.ZipFile(wheel).namelist())
    for needed in ("gnnstore/proto/graph.proto", "gnnstore/proto/graph_pb2.py", "gnnstore/proto/graph_pb2.pyi",
                   "gnnstore/proto/graph_pb2_grpc.py", "gnnstore/client/connect.py", "gnnstore/cli.py"):
        assert needed in names, needed
    with tarfile.open(sdist) as archive:
        carried = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    assert {"docker/Dockerfile", "pyproject.toml", "proto/graph.proto", "mkdocs.yml", "CHANGELOG.md",
            "deploy/kubernetes/servers.yaml"} <= carried

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    installed = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
                                "--no-index", "-q", str(wheel)], capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stderr[-3000:]
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    (Path(site) / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    where = subprocess.run([str(python), "-c", "import gnnstore; print(gnnstore.__file__, gnnstore.__version__)"],
                           capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    assert where.returncode == 0, where.stderr[-3000:]
    assert where.stdout.split() == [str(Path(site) / "gnnstore" / "__init__.py"), gnnstore.__version__]

    demo = subprocess.run([str(venv / "bin" / "gnnstore"), "demo", "--nodes", "2000", "--epochs", "1"],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600)
    assert demo.returncode == 0, demo.stderr[-3000:]
    assert "epoch 1" in demo.stdout and "server stopped (exit code 0)" in demo.stdout
    assert (tmp_path / "gnnstore-demo-report.json").exists()


def test_serving_needs_no_neo4j_driver(tmp_path: Path) -> None:
    """The driver is the neo4j extra's: a server of an embedded graph started without it (a base
    install) used to fail importing it."""
    data_dir = ingest(generate_graph(300, 4.0, 8, 3, seed=1), tmp_path / "data")
    _assert_serves_without(["neo4j"], data_dir)


def test_a_server_install_serves_and_the_tools_ask_for_the_train_extra(tmp_path: Path) -> None:
    """`pip install gnnstore` has no torch or PyG: `serve` runs without them, and a command that
    needs them (ingest) says which extra brings them, in one line."""
    data_dir = ingest(generate_graph(300, 4.0, 8, 3, seed=1), tmp_path / "data")
    _assert_serves_without(["torch", "torch_geometric"], data_dir)
    generate = _without(["torch", "torch_geometric"], ["ingest", "generate", "--nodes", "50", "--data-dir",
                                                      str(tmp_path / "other")])
    refused = subprocess.run([sys.executable, "-c", generate], capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2, refused.stderr[-3000:]
    assert refused.stderr.strip().splitlines() == [
        "error: this command needs torch, which a server install leaves out: pip install 'gnnstore[train]' "
        "(or use the gnnstore-tools image)"
    ]


def _without(modules: list[str], argv: list[str]) -> str:
    """Python source running ``gnnstore *argv`` as if ``modules`` were not installed."""
    return (f"import sys; sys.modules.update(dict.fromkeys({modules!r})); from gnnstore.cli import main; "
            f"sys.argv = ['gnnstore', *{argv!r}]; main()")


def _assert_serves_without(modules: list[str], data_dir: Path) -> None:
    """``gnnstore serve`` over ``data_dir`` starts serving as if ``modules`` were not installed."""
    serve = _without(modules, ["serve", "--data-dir", str(data_dir), "--port", "0"])
    proc = subprocess.Popen([sys.executable, "-c", serve], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        why = proc.stderr.read() if proc.poll() is not None else line
        assert line.startswith("gnnstore serving on 127.0.0.1:"), why
    finally:
        proc.terminate()
        proc.wait(timeout=60)
