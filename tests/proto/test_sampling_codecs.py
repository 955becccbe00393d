"""Sampler inputs (PyG's, decoded as numpy records) and outputs (numpy samples, decoded as PyG's)
survive the wire field by field."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch_geometric.sampler import (
    EdgeSamplerInput,
    HeteroSamplerOutput,
    NegativeSampling,
    NodeSamplerInput,
    SamplerOutput,
)

from gnnstore.client import sampler_wire
from gnnstore.client.received_rows import received_rows_from_proto
from gnnstore.common.errors import InvalidRequestError
from gnnstore.common.sample import Sample
from gnnstore.proto import graph_pb2, node_rows, sampler_input, sampler_output, sampling_options


def _ids(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int64)


def test_homogeneous_output_round_trip() -> None:
    out = Sample(
        node={None: _ids(4, 2, 9)}, row={None: _ids(1, 2)}, col={None: _ids(0, 0)}, edge={None: _ids(7, 3)},
        batch=None, num_sampled_nodes={None: [1, 2]}, num_sampled_edges={None: [2]}, metadata=(_ids(0), None),
    )
    back = sampler_wire.output_from_proto(sampler_output.output_to_proto(out))
    assert isinstance(back, SamplerOutput)
    for name in ("node", "row", "col", "edge"):
        assert back_ids(getattr(back, name)) == getattr(out, name)[None].tolist()
    assert back.batch is None
    assert back.num_sampled_nodes == [1, 2] and back.num_sampled_edges == [2]
    assert back.metadata[0].tolist() == [0] and back.metadata[1] is None


def back_ids(tensor: torch.Tensor) -> list[int]:
    assert tensor.dtype == torch.int64
    return tensor.tolist()


def test_hetero_output_round_trip_keeps_tuple_keys_and_empty_types() -> None:
    et = ("author", "writes", "paper")
    out = Sample(
        node={"paper": _ids(3, 1), "author": _ids()}, row={et: _ids()}, col={et: _ids()}, edge={et: _ids()},
        batch={"paper": _ids(0, 1), "author": _ids()},
        num_sampled_nodes={"paper": [2, 0], "author": [0, 0]}, num_sampled_edges={et: [0]},
        metadata=(_ids(5, 6), np.array([[0], [1]]), None),
    )
    back = sampler_wire.output_from_proto(sampler_output.output_to_proto(out))
    assert isinstance(back, HeteroSamplerOutput)
    assert set(back.node) == {"paper", "author"} and list(back.row) == [et]
    assert type(next(iter(back.row))) is tuple
    assert back.node["author"].shape == (0,)
    assert back.num_sampled_nodes == out.num_sampled_nodes
    assert back_ids(back.batch["paper"]) == [0, 1]
    assert back.metadata[1].tolist() == [[0], [1]] and back.metadata[2] is None


def test_node_input_round_trip() -> None:
    inputs = NodeSamplerInput(input_id=torch.tensor([0, 1]), node=torch.tensor([8, 3]), input_type="paper")
    back = sampler_input.node_input_from_proto(sampler_wire.node_input_to_proto(inputs))
    assert back.node.tolist() == [8, 3] and back.node.dtype == np.int64 and back.input_type == "paper"
    assert back.input_id.tolist() == [0, 1] and back.time is None


def test_inputs_without_input_id_round_trip_as_none() -> None:
    nodes = NodeSamplerInput(input_id=None, node=torch.tensor([8, 3]))
    assert sampler_input.node_input_from_proto(sampler_wire.node_input_to_proto(nodes)).input_id is None
    links = EdgeSamplerInput(input_id=None, row=torch.tensor([1, 2]), col=torch.tensor([3, 4]))
    back, _ = sampler_input.edge_input_from_proto(sampler_wire.edge_input_to_proto(links, None))
    assert back.input_id is None and back.col.tolist() == [3, 4]


@pytest.mark.parametrize("neg", [None, NegativeSampling("binary", 1.5), NegativeSampling("triplet", 3)])
def test_edge_input_round_trip(neg: NegativeSampling | None) -> None:
    inputs = EdgeSamplerInput(
        input_id=torch.tensor([0, 1]),
        row=torch.tensor([1, 2]),
        col=torch.tensor([3, 4]),
        label=torch.tensor([1.0, 2.0]),
        input_type=("a", "to", "b"),
    )
    back, back_neg = sampler_input.edge_input_from_proto(sampler_wire.edge_input_to_proto(inputs, neg))
    assert back.row.tolist() == [1, 2] and back.label.tolist() == [1.0, 2.0] and back.label.dtype == np.float32
    assert back.input_type == ("a", "to", "b")
    if neg is None:
        assert back_neg is None
    else:
        assert back_neg.triplet == neg.is_triplet() and back_neg.amount == neg.amount
        assert type(back_neg.amount) is type(neg.amount)


def test_num_neighbors_forms() -> None:
    options = sampling_options.options_to_proto([5, -1], replace=True, disjoint=False, seed=3)
    assert sampling_options.num_neighbors_from_proto(options) == [5, -1]
    assert options.seed == 3 and options.replace
    per_type = {("a", "to", "b"): [2, 1]}
    options = sampling_options.options_to_proto(per_type, replace=False, disjoint=False, seed=None)
    assert sampling_options.num_neighbors_from_proto(options) == per_type
    assert not options.HasField("seed")


def test_zero_hops_travel_apart_from_hops_not_sent() -> None:
    options = sampling_options.options_to_proto([], replace=False, disjoint=False, seed=1)
    assert options.no_hops and sampling_options.num_neighbors_from_proto(options) == []
    with pytest.raises(InvalidRequestError, match="was not sent"):
        sampling_options.num_neighbors_from_proto(graph_pb2.SamplingOptions())
    options.num_neighbors.append(2)
    with pytest.raises(InvalidRequestError, match="no_hops is set, but num_neighbors lists hops"):
        sampling_options.num_neighbors_from_proto(options)


def test_mismatched_link_lengths_are_refused() -> None:
    inputs = EdgeSamplerInput(input_id=torch.tensor([0]), row=torch.tensor([1, 2]), col=torch.tensor([3, 4]))
    with pytest.raises(InvalidRequestError, match="one entry per link"):
        sampler_input.edge_input_from_proto(sampler_wire.edge_input_to_proto(inputs, None))


def test_bad_negative_sampling_is_refused() -> None:
    inputs = EdgeSamplerInput(input_id=torch.tensor([0]), row=torch.tensor([1]), col=torch.tensor([3]))
    request = sampler_wire.edge_input_to_proto(inputs, NegativeSampling("binary", 1))
    request.neg_sampling.mode = "ternary"
    with pytest.raises(InvalidRequestError, match="ternary"):
        sampler_input.edge_input_from_proto(request)
    request.neg_sampling.mode, request.neg_sampling.amount = "triplet", 1.5
    with pytest.raises(InvalidRequestError, match="bad negative sampling"):
        sampler_input.edge_input_from_proto(request)


def test_node_rows_with_a_row_count_off_name_the_node_type_and_attr() -> None:
    rows = node_rows.NodeRows("paper", np.array([1, 5]), {"x": np.zeros((3, 4), np.float32)}, {"x": "float32"})
    message = node_rows.node_rows_to_proto(rows)
    with pytest.raises(InvalidRequestError, match="'paper': attr 'x' has \\[3, 4\\] rows for 2 ids"):
        received_rows_from_proto(message)


def test_edge_rows_round_trip_and_are_never_aligned() -> None:
    rows = node_rows.NodeRows((None, None), np.array([4, 2]), {"edge_attr": np.ones((2, 3), np.float32)},
                              {"edge_attr": "float32"})
    back = received_rows_from_proto(node_rows.node_rows_to_proto(rows))
    assert back.group == (None, None) and torch.equal(back.rows["edge_attr"], torch.ones(2, 3))
    aligned = node_rows.NodeRows(("a", "to", "b"), np.array([4]), {"w": np.ones(2, np.float32)}, {"w": "float32"},
                                 np.array([1]))
    with pytest.raises(InvalidRequestError, match="edge rows are never aligned"):
        received_rows_from_proto(node_rows.node_rows_to_proto(aligned))


def test_bfloat16_rows_travel_as_raw_words_and_arrive_as_bfloat16() -> None:
    x = torch.randn(3, 5).to(torch.bfloat16)
    rows = node_rows.NodeRows("paper", np.array([7, 1, 4]), {"x": x.view(torch.int16).numpy().view(np.uint16)},
                              {"x": "bfloat16"})
    back = received_rows_from_proto(node_rows.node_rows_to_proto(rows))
    assert back.rows["x"].dtype == torch.bfloat16 and torch.equal(back.rows["x"], x)
    assert back.ids.tolist() == [7, 1, 4]
