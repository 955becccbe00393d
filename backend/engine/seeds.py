"""A batch of seed nodes or seed links around one sampling call: PyG's ``node_sample`` and
``edge_sample``, in numpy.

For links, PyG draws negatives, merges the links' ends into seed nodes (unique ones, or one per
end when disjoint), samples, and writes the metadata a ``LinkLoader`` reads
(``edge_label_index`` and ``edge_label``, or ``src_index``, ``dst_pos_index`` and
``dst_neg_index``). :func:`plan_links` and :func:`sample_links` are that, step for step, with
the same order and dtypes, so the server and the in-process samplers share them; a test holds
them equal to PyG's own on every mode.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from gnnstore.backend.engine.topology import edge_ends
from gnnstore.common.graph_types import NodeType
from gnnstore.common.sample import Links, Negatives, Sample, SeedNodes

Draw = Callable[[int, str, int], np.ndarray]
"""``draw(count, endpoint, num_nodes)``: ``count`` negative ids of the ``'src'`` or ``'dst'``
end, in ``[0, num_nodes)``."""

Seeds = np.ndarray | dict[NodeType, np.ndarray]
"""Seed ids: one array (a homogeneous graph), or node type → array."""


class SeedSampler(Protocol):
    """A sampler :func:`sample_nodes` and :func:`sample_links` run: one call around seed ids."""

    disjoint: bool
    """Whether each seed keeps its own subgraph."""

    @property
    def num_nodes(self) -> int | dict[NodeType, int]:
        """Node count, or node type → count: the range negatives are drawn from."""

    def sample_seeds(self, seed: Seeds, seed_time: Seeds | None = None) -> Sample:
        """Sample around global seed ids (and their times)."""

    def check_links(self, links: Links) -> np.ndarray | dict[NodeType, np.ndarray] | None:
        """Refuse links this sampler cannot sample, before negatives are drawn; the node times
        a negative must not be later than (``None``: any node will do)."""


@dataclass(frozen=True)
class LinkPlan:
    """What to sample for a batch of links, and the metadata of its output.

    Attributes:
        seed: the seed nodes (one array, or node type → array on a heterogeneous graph).
        seed_time: their times, shaped as ``seed`` (``None``: not temporal).
        labels: the metadata after ``input_id``: ``(edge_label_index, edge_label, src_time)``,
            or in triplet mode ``(src_index, dst_pos_index, dst_neg_index, src_time)``.
        num_pos: the positive links. A disjoint output's ``batch`` is taken modulo it, so that
            it names the link (a positive and its negatives share one).
    """

    seed: Seeds
    seed_time: Seeds | None
    labels: tuple[np.ndarray | None, ...]
    num_pos: int


def plan_links(
    links: Links,
    num_nodes: int | dict[NodeType, int],
    disjoint: bool,
    node_time: np.ndarray | dict[NodeType, np.ndarray] | None = None,
    negatives: Negatives | None = None,
    draw: Draw | None = None,
) -> LinkPlan:
    """The seeds and metadata PyG's ``edge_sample`` makes for ``links``.

    Args:
        links: the seed links; their times only when ``disjoint`` (temporal sampling).
        num_nodes: node count, or node type → count: the range negatives are drawn from.
        disjoint: each seed keeps its own subgraph.
        node_time: node times (temporal): a negative is no later than its link.
        negatives: negatives to draw (``None``: none), from ``draw``.
    """
    row, col, label, time = links.row, links.col, links.label, links.time
    src_type, dst_type = edge_ends(links.input_type)
    if isinstance(num_nodes, dict):
        num_src, num_dst = num_nodes[src_type], num_nodes[dst_type]
    else:
        num_src = num_dst = num_nodes
    src_time = dst_time = time
    num_pos, num_neg = len(row), 0
    triplet = negatives is not None and negatives.triplet
    if negatives is not None:
        num_neg = math.ceil(num_pos * negatives.amount)
        if not triplet:
            src_neg = _negatives(row, negatives, draw, num_src, time, _of(node_time, src_type), "src")
            row = np.concatenate([row, src_neg])
        col = np.concatenate([col, _negatives(col, negatives, draw, num_dst, time, _of(node_time, dst_type), "dst")])
        if not triplet:
            label = np.ones(num_pos, np.float32) if label is None else label
            label = np.concatenate([label, np.zeros((num_neg, *label.shape[1:]), label.dtype)])
            if time is not None:
                src_time = dst_time = np.tile(time, 1 + math.ceil(negatives.amount))[: num_pos + num_neg]
        elif time is not None:
            dst_time = np.tile(time, 1 + int(negatives.amount))

    seed_time = None
    if links.input_type is not None and src_type != dst_type:
        if disjoint:
            seed = {src_type: row, dst_type: col}
            src_index, dst_index = np.arange(len(row)), np.arange(len(col))
        else:
            src_seed, src_index = np.unique(row, return_inverse=True)
            dst_seed, dst_index = np.unique(col, return_inverse=True)
            seed = {src_type: src_seed, dst_type: dst_seed}
        if time is not None:
            seed_time = {src_type: src_time, dst_type: dst_time}
    else:
        both = np.concatenate([row, col])
        merged, index = (both, np.arange(len(both))) if disjoint else np.unique(both, return_inverse=True)
        src_index, dst_index = index[: len(row)], index[len(row):]
        seed = merged if links.input_type is None else {src_type: merged}
        if time is not None:
            times = np.concatenate([src_time, dst_time])
            seed_time = times if links.input_type is None else {src_type: times}

    if not triplet:
        labels = (np.stack([src_index, dst_index]), label, src_time)
    else:
        # A disjoint batch lists the negatives round by round; otherwise link by link (as PyG).
        dst_neg = dst_index[num_pos:]
        dst_neg = (dst_neg.reshape(-1, num_pos).T if disjoint else dst_neg).reshape(num_pos, -1)
        labels = (src_index, dst_index[:num_pos], dst_neg[:, 0] if dst_neg.shape[1] == 1 else dst_neg, src_time)
    return LinkPlan(seed, seed_time, labels, num_pos)


def sample_nodes(sampler: SeedSampler, nodes: SeedNodes) -> Sample:
    """PyG's ``node_sample``: one call of ``sampler`` around the seed nodes; metadata
    ``(input_id, time)``."""
    node, input_type, time = nodes.node, nodes.input_type, nodes.time
    if input_type is None:
        out = sampler.sample_seeds(node, time)
    else:
        out = sampler.sample_seeds({input_type: node}, None if time is None else {input_type: time})
    out.metadata = (nodes.input_id, time)
    return out


def sample_links(
    sampler: SeedSampler, links: Links, negatives: Negatives | None = None, draw: Draw | None = None
) -> Sample:
    """PyG's ``edge_sample``: one call of ``sampler`` around the links' ends and their negatives
    (drawn by ``draw``; see :func:`plan_links`); a disjoint ``batch`` names each node's link;
    metadata ``(input_id, *plan.labels)``."""
    node_time = sampler.check_links(links)
    plan = plan_links(links, sampler.num_nodes, sampler.disjoint, node_time, negatives, draw)
    out = sampler.sample_seeds(plan.seed, plan.seed_time)
    if sampler.disjoint:
        out.batch = {key: batch % plan.num_pos for key, batch in out.batch.items()}
    out.metadata = (links.input_id, *plan.labels)
    return out


def _of(values: np.ndarray | dict | None, node_type: NodeType | None) -> np.ndarray | None:
    """The node times of one node type (all of them on a homogeneous graph)."""
    return values.get(node_type) if isinstance(values, dict) else values


def _negatives(
    ends: np.ndarray, negatives: Negatives, draw: Draw, num_nodes: int,
    time: np.ndarray | None, node_time: np.ndarray | None, endpoint: str,
) -> np.ndarray:
    """PyG's ``neg_sample``: uniform draws; with node times, redrawn (5 rounds at most) until no
    negative is later than its link, then the earliest node for what is left."""
    num_neg = math.ceil(len(ends) * negatives.amount)
    if node_time is None:
        return draw(num_neg, endpoint, num_nodes)
    rounds = math.ceil(negatives.amount)
    link_time = np.broadcast_to(time.reshape(1, -1), (rounds, len(ends)))
    out = np.array(draw(rounds * len(ends), endpoint, num_nodes)).reshape(rounds, len(ends))
    invalid = node_time[out] > link_time
    for _ in range(5):
        if not invalid.any():
            return out.reshape(-1)[:num_neg]
        redrawn = draw(int(invalid.sum()), endpoint, num_nodes)
        out[invalid] = redrawn
        # As PyG: a redrawn negative stays marked when it is no earlier than its link.
        invalid[invalid.copy()] = node_time[redrawn] >= link_time[invalid]
    out[invalid] = node_time.argmin()
    return out.reshape(-1)[:num_neg]
