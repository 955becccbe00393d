"""Served graphs for tests: ingest through the real stores, serve on port 0.

The graph goes to the embedded database (LadybugDB) in the data directory, or to the session's Neo4j
(``tests/neo4j_server.py``), which ``ingest_into_neo4j`` empties first: it holds one graph.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from neo4j_server import Auth, wipe
from torch_geometric.data import Data, HeteroData

from gnnstore.backend.server.server_process import ServerProcess
from gnnstore.client import Connection, server_stats
from gnnstore.ingest.graph_ingest import ingest_graph
from gnnstore.stores.base import BaseGraphStore
from gnnstore.stores.data_dir import open_stores
from gnnstore.stores.neo4j_graph_store import Neo4jGraphStore

__all__ = [
    "ServerProcess",
    "ingest",
    "ingest_into_neo4j",
    "requests_made",
    "serve_graph",
    "start_neo4j_server",
    "start_server",
]


def ingest(data: Data | HeteroData, data_dir: Path, graph_store: BaseGraphStore | None = None) -> Path:
    """Write ``data`` into a fresh data directory through the real stores; return the folder.

    ``graph_store``: where the edges go instead of the folder's database.
    """
    with open_stores(data_dir, graph_store=graph_store) as stores:
        ingest_graph(data, stores)
    return data_dir


def ingest_into_neo4j(data: Data | HeteroData, data_dir: Path, uri: str, auth: Auth) -> Path:
    """Empty the Neo4j at ``uri``, then write ``data``: edges there, features and ids in ``data_dir``."""
    wipe(uri, auth)
    return ingest(data, data_dir, Neo4jGraphStore(uri, auth))


def start_server(
    data_dir: Path, *args: str, env: dict[str, str] | None = None, name: str = "server"
) -> ServerProcess:
    """``gnnstore serve`` over ``data_dir``, its log beside the folder as ``<folder>-<name>.log``."""
    return ServerProcess(data_dir, *args, log=data_dir.parent / f"{data_dir.name}-{name}.log", env=env)


def start_neo4j_server(
    data_dir: Path, uri: str, auth: Auth, *args: str, sampling: str = "snapshot"
) -> ServerProcess:
    """``gnnstore serve --graph-backend neo4j`` over ``data_dir`` and the Neo4j at ``uri``."""
    env = {} if auth is None else {"GNNSTORE_NEO4J_USER": auth[0], "GNNSTORE_NEO4J_PASSWORD": auth[1]}
    return start_server(data_dir, "--graph-backend", "neo4j", "--neo4j-uri", uri,
                        "--neo4j-sampling", sampling, *args, env=env, name=f"neo4j-{sampling}")


def serve_graph(data: Data | HeteroData, folder: Path, *args: str) -> ServerProcess:
    """Ingest ``data`` into ``folder/data`` and serve it."""
    return start_server(ingest(data, folder / "data"), *args)


def requests_made(address: str, method: str, **connection: Any) -> int:
    """How many calls of ``method`` (e.g. ``/gnnstore.v1.FeatureService/MultiGet``) the server
    at ``address`` has answered so far; ``connection``: ``Connection`` arguments (e.g. ``tls``)."""
    stats = server_stats(Connection(address, **connection) if connection else address).get(method)
    return 0 if stats is None else stats.requests
