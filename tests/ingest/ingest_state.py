"""What the stores hold, read back for before/after comparisons in the ingest tests."""
from __future__ import annotations

import torch
from pyg_views import features_of, graph_of


def stored_edges(graph_store, edge_type) -> tuple[torch.Tensor, torch.Tensor]:
    """The stored edge list of ``edge_type`` as ``[2, E]`` and its e_id, in e_id order."""
    chunks = list(graph_store.iter_edge_index(edge_type, chunk_size=1000))
    row, col, e_id = (torch.cat(parts) for parts in zip(*chunks))
    return torch.stack([row, col]), e_id


def store_state(stores) -> dict:
    """Everything the stores hold, for before/after comparisons."""
    state = {"features": {}, "edges": {}, "ids": {}}
    for s in features_of(stores).tensor_schema():  # node and edge attributes
        state["features"][(s.group_name, s.attr_name)] = features_of(stores).get_tensor(
            group_name=s.group_name, attr_name=s.attr_name, index=None)
    for attr in graph_of(stores).get_all_edge_attrs():
        state["edges"][attr.edge_type] = (stored_edges(graph_of(stores), attr.edge_type)[0], attr.size)
    for node_type in stores.id_map.node_types():
        n = stores.id_map.num_nodes(node_type)
        state["ids"][node_type] = stores.id_map.to_keys(node_type, torch.arange(n))
    return state


def assert_same_state(before: dict, after: dict) -> None:
    assert before["ids"] == after["ids"]
    assert before["features"].keys() == after["features"].keys()
    for key, tensor in before["features"].items():
        assert torch.equal(tensor, after["features"][key]), key
    assert before["edges"].keys() == after["edges"].keys()
    for key, (edges, size) in before["edges"].items():
        assert torch.equal(edges, after["edges"][key][0]) and tuple(size) == tuple(after["edges"][key][1])
