"""Served graphs for the client tests: one homogeneous and one heterogeneous server per session."""
from __future__ import annotations

from collections.abc import Iterator

import pytest
from torch_geometric.data import Data, HeteroData

from gnnstore.ingest.generator import generate_graph, generate_hetero_graph
from served import ServerProcess, serve_graph


@pytest.fixture(scope="session")
def homo_graph() -> Data:
    """The homogeneous graph both served and used as the truth (ids are positions)."""
    return generate_graph(400, 5.0, 8, 4, seed=0)


@pytest.fixture(scope="session")
def hetero_graph() -> HeteroData:
    """The heterogeneous graph: 3 node types, 6 edge types (reverse edges included)."""
    return generate_hetero_graph(80, 50, 6, num_features=8, seed=0)


@pytest.fixture(scope="session")
def homo_server(homo_graph: Data, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A read-only server over ``homo_graph``."""
    server = serve_graph(homo_graph, tmp_path_factory.mktemp("homo"), "--read-only")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def hetero_server(
    hetero_graph: HeteroData, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """A read-only server over ``hetero_graph``."""
    server = serve_graph(hetero_graph, tmp_path_factory.mktemp("hetero"), "--read-only")
    yield server
    server.stop()
