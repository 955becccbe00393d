"""Served graphs for tests: ingest into a folder through the real stores, serve it on port 0."""
from __future__ import annotations

from pathlib import Path

from torch_geometric.data import Data, HeteroData

from gnnstore.backend.server_process import ServerProcess
from gnnstore.ingest.graph_ingest import ingest_graph
from gnnstore.stores.data_dir import open_stores

__all__ = ["ServerProcess", "ingest", "serve_graph", "start_server"]


def ingest(data: Data | HeteroData, data_dir: Path) -> Path:
    """Write ``data`` into a fresh data directory through the real stores; return the folder."""
    with open_stores(data_dir) as stores:
        ingest_graph(data, stores)
    return data_dir


def start_server(data_dir: Path, *args: str) -> ServerProcess:
    """``gnnstore serve`` over ``data_dir``, its log beside the folder."""
    return ServerProcess(data_dir, *args, log=data_dir.parent / f"{data_dir.name}-server.log")


def serve_graph(data: Data | HeteroData, folder: Path, *args: str) -> ServerProcess:
    """Ingest ``data`` into ``folder/data`` and serve it."""
    return start_server(ingest(data, folder / "data"), *args)
