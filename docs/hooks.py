"""MkDocs hooks: the benchmarks' result pages as the site's Benchmarks section, and the
``gnnstore`` package laid out as one folder for mkdocstrings to read.

The benchmarks write ``benchmarks/results/*.md`` and ``*.png`` (stamped with commit, date and
machine); they appear as ``benchmarks/<name>`` in the site, never copied by hand.

pyproject.toml assembles ``gnnstore`` from several top-level folders (``core/`` is
``gnnstore``, ``client/`` is ``gnnstore.client``, ...). Griffe reads packages from folders, so
each build mirrors that mapping with symbolic links in a temporary folder of its own and gives
it to mkdocstrings as its only search path. Nothing is imported.
"""
from __future__ import annotations

import atexit
import shutil
import tempfile
import tomllib
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.plugins import event_priority
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add each result page and chart of the benchmarks under ``benchmarks/``."""
    for path in sorted(RESULTS.glob("*")):
        if path.suffix in (".md", ".png"):
            files.append(File.generated(config, f"benchmarks/{path.name}", abs_src_path=str(path)))
    return files


@event_priority(100)  # before mkdocstrings reads its handlers' settings
def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """Lay the package out in a fresh folder and point mkdocstrings' Python handler at it."""
    folder = Path(tempfile.mkdtemp(prefix="gnnstore-docs-package-"))
    atexit.register(shutil.rmtree, folder, True)
    _link_package(folder / "gnnstore")
    config.plugins["mkdocstrings"].config.handlers.setdefault("python", {})["paths"] = [str(folder)]
    return config


def _link_package(top: Path) -> None:
    """The ``gnnstore`` package at ``top``, as links to the folders pyproject.toml's ``package-dir`` names."""
    package_dir = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    top.mkdir(parents=True)
    for name, folder in package_dir.items():
        if name == "gnnstore":
            for source in (ROOT / folder).glob("*.py"):
                (top / source.name).symlink_to(source)
        else:
            (top / name.removeprefix("gnnstore.")).symlink_to(ROOT / folder, target_is_directory=True)
