"""Served graphs for the client tests.

``homo_server`` / ``hetero_server``: one server each per session over an embedded graph (LadybugDB). ``served_homo`` /
``served_hetero``: the same graphs served from each graph backend in turn (a test using them
runs once per backend, ``[embedded]`` and ``[neo4j]``); the Neo4j ones share the session's Neo4j,
which holds one graph at a time, so at most one of them runs at once.
"""
from __future__ import annotations

from collections.abc import Iterator

import pytest
from neo4j_server import Auth, neo4j_server  # noqa: F401 - registers the session fixture
from served import ServerProcess, ingest_into_neo4j, serve_graph, start_neo4j_server
from torch_geometric.data import Data, HeteroData

from gnnstore.ingest.generator import generate_graph, generate_hetero_graph


@pytest.fixture(scope="session")
def homo_graph() -> Data:
    """The homogeneous graph both served and used as the truth (ids are positions)."""
    return generate_graph(400, 5.0, 8, 4, seed=0)


@pytest.fixture(scope="session")
def hetero_graph() -> HeteroData:
    """The heterogeneous graph: 3 node types, 6 edge types (reverse edges included)."""
    return generate_hetero_graph(80, 50, 6, num_features=8, seed=0)


def _read_only_server(
    graph: Data | HeteroData, folders: pytest.TempPathFactory, name: str
) -> Iterator[ServerProcess]:
    """A read-only server over ``graph`` in a new folder ``name``, stopped after the yield."""
    server = serve_graph(graph, folders.mktemp(name), "--read-only")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def homo_server(homo_graph: Data, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A read-only server over ``homo_graph``."""
    yield from _read_only_server(homo_graph, tmp_path_factory, "homo")


@pytest.fixture(scope="session")
def hetero_server(
    hetero_graph: HeteroData, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """A read-only server over ``hetero_graph``."""
    yield from _read_only_server(hetero_graph, tmp_path_factory, "hetero")


class Neo4jServers:
    """Read-only, snapshot-sampling servers over graphs in the session's Neo4j, one at a time.

    Serving another graph stops the running server, empties Neo4j and ingests the new graph.

    Args:
        uri, auth: the session's Neo4j.
        folders: where each graph's data directory (features, id map) goes.
    """

    def __init__(self, uri: str, auth: Auth, folders: pytest.TempPathFactory) -> None:
        self.uri, self.auth, self.folders = uri, auth, folders
        self.name: str | None = None
        self.server: ServerProcess | None = None

    def serve(self, name: str, graph: Data | HeteroData) -> ServerProcess:
        """The server over ``graph`` (called ``name``), started unless it is the running one."""
        if name != self.name or self.server is None:
            self.stop()
            folder = self.folders.mktemp(f"neo4j-{name}")
            data_dir = ingest_into_neo4j(graph, folder / "data", self.uri, self.auth)
            self.server = start_neo4j_server(data_dir, self.uri, self.auth, "--read-only")
            self.name = name
        return self.server

    def stop(self) -> None:
        """Stop the running server, if any."""
        if self.server is not None:
            self.server.stop()
        self.name = self.server = None


@pytest.fixture(scope="module")
def neo4j_servers(
    neo4j_server: tuple, tmp_path_factory: pytest.TempPathFactory  # noqa: F811 - the imported fixture
) -> Iterator[Neo4jServers]:
    """The Neo4j-backed servers of one test module (stopped when it ends)."""
    servers = Neo4jServers(*neo4j_server, tmp_path_factory)
    yield servers
    servers.stop()


@pytest.fixture(scope="module", params=["embedded", pytest.param("neo4j", marks=pytest.mark.neo4j)])
def graph_backend(request: pytest.FixtureRequest) -> str:
    """Each graph backend in turn; pytest runs a module's tests for one before the other."""
    return request.param


@pytest.fixture
def served_homo(graph_backend: str, homo_graph: Data, request: pytest.FixtureRequest) -> ServerProcess:
    """``homo_graph`` served from ``graph_backend``."""
    if graph_backend == "embedded":
        return request.getfixturevalue("homo_server")
    return request.getfixturevalue("neo4j_servers").serve("homo", homo_graph)


@pytest.fixture
def served_hetero(
    graph_backend: str, hetero_graph: HeteroData, request: pytest.FixtureRequest
) -> ServerProcess:
    """``hetero_graph`` served from ``graph_backend``."""
    if graph_backend == "embedded":
        return request.getfixturevalue("hetero_server")
    return request.getfixturevalue("neo4j_servers").serve("hetero", hetero_graph)
