"""Shared test helpers for the sampling engine: small graphs and a batch invariant checker."""
from __future__ import annotations

import numpy as np
import torch
from torch import Tensor
from torch_geometric.data import HeteroData
from torch_geometric.sampler import HeteroSamplerOutput, SamplerOutput
from torch_geometric.typing import EdgeType

from gnnstore.backend.engine.topology import edge_ends


def power_law_edge_index(num_nodes: int, num_edges: int, seed: int, num_src: int | None = None) -> Tensor:
    """A ``[2, E]`` COO whose destinations follow a Zipf-like law: hubs, leaves and isolated nodes."""
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, num_nodes + 1) ** 1.1
    dst = rng.choice(num_nodes, size=num_edges, p=weights / weights.sum())
    src = rng.integers(0, num_src or num_nodes, size=num_edges)
    return torch.from_numpy(np.stack([src, dst]).astype(np.int64))


def hetero_graph(seed: int = 0) -> HeteroData:
    """3 node types and 6 edge types (3 relations and their reverses), with hubs and isolated nodes."""
    sizes = {"paper": 120, "author": 80, "venue": 7}
    data = HeteroData()
    for i, (nt, n) in enumerate(sizes.items()):
        data[nt].x = torch.arange(n, dtype=torch.float32).view(-1, 1) + 1000 * i
        data[nt].num_nodes = n
    relations = [("author", "writes", "paper", 500), ("paper", "cites", "paper", 700),
                 ("paper", "published_in", "venue", 120)]
    for k, (src, rel, dst, e) in enumerate(relations):
        ei = power_law_edge_index(sizes[dst], e, seed + k, num_src=sizes[src])
        data[src, rel, dst].edge_index = ei
        data[dst, f"rev_{rel}", src].edge_index = ei.flip(0)
    return data


def expected_count(deg: Tensor, k: int, replace: bool) -> Tensor:
    """How many edges each node of in-degree ``deg`` yields for fanout ``k``."""
    if k < 0:
        return deg
    if replace:
        return torch.where(deg > 0, torch.full_like(deg, k), torch.zeros_like(deg))
    return deg.clamp(max=k)


def check_batch(
    out: SamplerOutput | HeteroSamplerOutput,
    coo: dict[EdgeType | None, Tensor],
    num_nodes: dict,
    fanouts: dict[EdgeType | None, list[int]],
    seeds: dict,
    *,
    replace: bool = False,
    disjoint: bool = False,
) -> None:
    """Assert every invariant PyG's loaders and models rely on (homogeneous: key ``None``)."""
    hetero = isinstance(out, HeteroSamplerOutput)
    pick = (lambda d, k: d[k]) if hetero else (lambda d, k: d)
    num_hops = len(next(iter(fanouts.values())))
    node = {nt: pick(out.node, nt) for nt in num_nodes}
    nsn = {nt: pick(out.num_sampled_nodes, nt) for nt in num_nodes}
    offsets = {nt: np.concatenate([[0], np.cumsum(nsn[nt])]) for nt in num_nodes}
    for nt, ids in seeds.items():
        assert torch.equal(node[nt][: ids.numel()], ids.long()), f"seeds of {nt} not first/in order"
    for nt in num_nodes:
        assert len(nsn[nt]) == num_hops + 1 and sum(nsn[nt]) == node[nt].numel()
        assert node[nt].dtype == torch.int64
        if node[nt].numel():
            assert 0 <= int(node[nt].min()) and int(node[nt].max()) < num_nodes[nt]
        if disjoint:
            batch = pick(out.batch, nt)
            pairs = batch * num_nodes[nt] + node[nt]
            assert pairs.unique().numel() == pairs.numel(), f"a subtree of {nt} repeats a node"
        elif nt in seeds and seeds[nt].unique().numel() == seeds[nt].numel():
            assert node[nt].unique().numel() == node[nt].numel(), f"n_id of {nt} repeats a node"
    for et, (src_all, dst_all) in coo.items():
        s_t, d_t = edge_ends(et)
        row, col, edge = pick(out.row, et), pick(out.col, et), pick(out.edge, et)
        nse = pick(out.num_sampled_edges, et)
        assert edge.dtype == torch.int64 and row.dtype == col.dtype == torch.int64
        assert len(nse) == num_hops and sum(nse) == row.numel() == col.numel() == edge.numel()
        assert torch.equal(node[s_t][row], src_all[edge]), f"{et}: n_id[row] != src of e_id"
        assert torch.equal(node[d_t][col], dst_all[edge]), f"{et}: n_id[col] != dst of e_id"
        if disjoint:
            assert torch.equal(pick(out.batch, s_t)[row], pick(out.batch, d_t)[col])
        deg = torch.bincount(dst_all, minlength=num_nodes[d_t])
        start = 0
        for hop in range(num_hops):
            r, c = row[start:start + nse[hop]], col[start:start + nse[hop]]
            e = edge[start:start + nse[hop]]
            start += nse[hop]
            lo, hi = offsets[d_t][hop], offsets[d_t][hop + 1]
            assert bool(((c >= lo) & (c < hi)).all()), f"{et} hop {hop}: edges not hop-contiguous"
            assert bool((r < offsets[s_t][hop + 2]).all()), f"{et} hop {hop}: source from a later hop"
            got = torch.bincount(c - lo, minlength=hi - lo)
            want = expected_count(deg[node[d_t][lo:hi]], fanouts[et][hop], replace)
            assert torch.equal(got, want), f"{et} hop {hop}: sampled in-degree != min(k, deg)"
            if not replace:
                key = c * (edge.max() + 1 if edge.numel() else 1) + e
                assert key.unique().numel() == key.numel(), f"{et} hop {hop}: an edge picked twice"
