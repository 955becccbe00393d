"""The server runs without the trainer's stack: a cold ``gnnstore serve`` imports neither torch nor
PyG, from its start through sampling with rows, feature reads, Puts and graph writes."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import torch
from served import ServerProcess, ingest
from torch_geometric.sampler import NodeSamplerInput

from gnnstore.client import GraphWriter, RemoteIdMap, RemoteNeighborSampler, connect
from gnnstore.ingest.generator import generate_graph


def _imported(log: str) -> set[str]:
    """The modules ``python -X importtime`` reported importing, from the server's stderr."""
    return {line.rsplit("|", 1)[1].strip() for line in log.splitlines() if line.startswith("import time:")}


def test_a_cold_server_imports_neither_torch_nor_pyg_while_it_serves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    graph = generate_graph(400, 5.0, 8, 3, seed=4)
    graph.x = graph.x.to(torch.bfloat16)  # rows numpy lacks a dtype for, through the whole path
    data_dir = ingest(graph, tmp_path / "data")
    monkeypatch.setattr(ServerProcess, "spawn", subprocess.Popen)  # a fresh interpreter, not a warm fork
    log = tmp_path / "server.log"
    with ServerProcess(data_dir, log=log, env={"PYTHONPROFILEIMPORTTIME": "1"}) as server:
        fs, _ = connect(server.address, cache_bytes=0)
        sampler = RemoteNeighborSampler(fs, [3, 2], feature_store=fs)
        out = sampler.sample_from_nodes(NodeSamplerInput(input_id=None, node=torch.arange(32)))
        x = fs.get_tensor(group_name=None, attr_name="x", index=out.node)
        assert x.dtype == torch.bfloat16 and torch.equal(x, graph.x[out.node])
        ones = torch.ones(2, 8, dtype=torch.bfloat16)
        fs.put_tensor(ones, group_name=None, attr_name="x", index=torch.tensor([0, 1]))
        assert torch.equal(fs.get_tensor(group_name=None, attr_name="x", index=torch.tensor([1, 2])),
                           torch.cat([torch.ones(1, 8, dtype=torch.bfloat16), graph.x[2:3]]))
        rows = {None: {s.attr_name: torch.zeros((1, *s.shape[1:]), dtype=getattr(torch, s.dtype))
                       for s in fs.schema() if s.group_name is None}}
        edges = {None: (torch.tensor([5]), torch.tensor([3]))}
        written = GraphWriter(fs).write(nodes={None: [10_000]}, rows=rows, add_edges=edges)
        assert RemoteIdMap(server.address).to_ids(None, [10_000]).tolist() == written.node_ids[None].tolist()
    imported = _imported(log.read_text())
    assert "gnnstore.backend.server.server" in imported, "no import profile in the server's log"
    assert not {m for m in imported if m.split(".")[0] in ("torch", "torch_geometric")}
