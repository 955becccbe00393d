"""Loading graphs into the stores: PyG objects, CSV/Parquet/.npy files, Planetoid, a generator."""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gnnstore.ingest.file_source import ingest_files, read_graph_files
    from gnnstore.ingest.generator import generate_graph, generate_hetero_graph
    from gnnstore.ingest.graph_ingest import ingest_graph
    from gnnstore.ingest.planetoid import load_planetoid
    from gnnstore.ingest.report import IngestReport, IngestStep

# Imported on first use, so that `gnnstore <command> --help` loads neither torch nor PyG.
_EXPORTS = {
    "IngestReport": "gnnstore.ingest.report",
    "IngestStep": "gnnstore.ingest.report",
    "generate_graph": "gnnstore.ingest.generator",
    "generate_hetero_graph": "gnnstore.ingest.generator",
    "ingest_files": "gnnstore.ingest.file_source",
    "ingest_graph": "gnnstore.ingest.graph_ingest",
    "load_planetoid": "gnnstore.ingest.planetoid",
    "read_graph_files": "gnnstore.ingest.file_source",
}

__all__ = [
    "IngestReport",
    "IngestStep",
    "generate_graph",
    "generate_hetero_graph",
    "ingest_files",
    "ingest_graph",
    "load_planetoid",
    "read_graph_files",
]


def __getattr__(name: str) -> object:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
