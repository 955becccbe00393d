"""MkDocs hooks: the benchmarks' result pages as the site's Benchmarks section, and the
``gnnstore`` package laid out as one folder for mkdocstrings to read.

The benchmarks write ``benchmarks/results/*.md`` and ``*.png`` (stamped with commit, date and
machine); they appear as ``benchmarks/<name>`` in the site, never copied by hand.

pyproject.toml assembles ``gnnstore`` from several top-level folders (``core/`` is
``gnnstore``, ``client/`` is ``gnnstore.client``, ...). Griffe reads packages from folders, so
before the build this mirrors that mapping with symbolic links under ``build/docs-package``
(the path mkdocs.yml gives mkdocstrings). Nothing is imported.
"""
from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "build" / "docs-package"
RESULTS = ROOT / "benchmarks" / "results"


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add each result page and chart of the benchmarks under ``benchmarks/``."""
    for path in sorted(RESULTS.glob("*")):
        if path.suffix in (".md", ".png"):
            files.append(File.generated(config, f"benchmarks/{path.name}", abs_src_path=str(path)))
    return files


def on_pre_build(config: MkDocsConfig) -> None:
    """Rebuild the linked package tree from pyproject.toml's ``package-dir``."""
    package_dir = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    shutil.rmtree(PACKAGE, ignore_errors=True)
    top = PACKAGE / "gnnstore"
    top.mkdir(parents=True)
    for name, folder in package_dir.items():
        if name == "gnnstore":
            for source in (ROOT / folder).glob("*.py"):
                (top / source.name).symlink_to(source)
        else:
            (top / name.removeprefix("gnnstore.")).symlink_to(ROOT / folder, target_is_directory=True)
