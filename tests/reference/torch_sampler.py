"""A small pure-torch (no pyg-lib, no torch-sparse) neighbor sampler that
plugs into PyG's NodeLoader / LinkLoader / NeighborLoader / LinkNeighborLoader
through the BaseSampler interface, plus instrumented in-memory stores that log
every FeatureStore / GraphStore call made by the loaders.

Design notes (see ../pyg-contract.md):
  * `_sample(seed, seed_time)` is the only sampling primitive.  We reuse PyG's
    module-level functions `node_sample` and `edge_sample`
    (torch_geometric/sampler/neighbor_sampler.py) so that `metadata`,
    negative sampling (binary / triplet), `edge_label_index`, `src_index`,
    `dst_pos_index`, `dst_neg_index` are produced exactly as PyG's own
    NeighborSampler produces them.
  * Contract required by `edge_sample`: `out.node[:len(seed)] == seed` (seed
    nodes come first, in the given order), and `row`/`col` are LOCAL indices
    into `out.node` (per node type for hetero).
  * Like PyG's NeighborSampler on a (FeatureStore, GraphStore) pair, this
    sampler materialises the full topology once via `graph_store.csc()`.  A
    remote (gRPC) sampler would instead implement `_sample` with a server call.
  * Supports: homogeneous + heterogeneous, uniform sampling without
    replacement, `-1` = all neighbours, non-disjoint, non-temporal.
"""
import os
from collections import defaultdict
from typing import Dict, List, Optional, Tuple, Union

import torch
from pyg_testing_stores import MyFeatureStore, MyGraphStore
from torch import Tensor
from torch_geometric.data import (
    EdgeAttr,
    FeatureStore,
    GraphStore,
    TensorAttr,
    remote_backend_utils,
)
from torch_geometric.sampler import (
    BaseSampler,
    EdgeSamplerInput,
    HeteroSamplerOutput,
    NegativeSampling,
    NodeSamplerInput,
    SamplerOutput,
)
from torch_geometric.sampler.neighbor_sampler import edge_sample, node_sample

# --------------------------------------------------------------------------- #
# Instrumented stores                                                         #
# --------------------------------------------------------------------------- #

CALL_LOG: List[Tuple] = []


def _idx_desc(index):
    if isinstance(index, Tensor):
        return f'Tensor[{index.numel()}]'
    return repr(index)


class LoggingFeatureStore(MyFeatureStore):
    """MyFeatureStore that records each backend call (and the process id)."""
    def _get_tensor(self, attr: TensorAttr):
        CALL_LOG.append(('fs._get_tensor', os.getpid(), attr.group_name,
                         attr.attr_name, _idx_desc(attr.index)))
        return super()._get_tensor(attr)

    def _multi_get_tensor(self, attrs: List[TensorAttr]):
        CALL_LOG.append(('fs._multi_get_tensor', os.getpid(), [
            (a.group_name, a.attr_name, _idx_desc(a.index)) for a in attrs
        ]))
        # Fast path: one vectorised gather per attribute (MyFeatureStore's
        # `_get_tensor` is O(|index| * N)).
        out = []
        for attr in attrs:
            index, tensor = self.store[self.key(attr)]
            if attr.index is None or (isinstance(attr.index, slice) and
                                      attr.index == slice(None)):
                out.append(tensor)
            else:
                assert torch.equal(index, torch.arange(index.numel()))
                out.append(tensor[attr.index])
        return out

    def _get_tensor_size(self, attr: TensorAttr):
        CALL_LOG.append(('fs._get_tensor_size', os.getpid(), attr.group_name,
                         attr.attr_name, _idx_desc(attr.index)))
        return super()._get_tensor_size(attr)

    def get_all_tensor_attrs(self) -> List[TensorAttr]:
        CALL_LOG.append(('fs.get_all_tensor_attrs', os.getpid()))
        return super().get_all_tensor_attrs()


class LoggingGraphStore(MyGraphStore):
    def _get_edge_index(self, edge_attr: EdgeAttr):
        CALL_LOG.append(('gs._get_edge_index', os.getpid(),
                         edge_attr.edge_type, edge_attr.layout.value))
        return super()._get_edge_index(edge_attr)

    def get_all_edge_attrs(self) -> List[EdgeAttr]:
        CALL_LOG.append(('gs.get_all_edge_attrs', os.getpid()))
        return super().get_all_edge_attrs()


def summarize_log(log=None, reset=True):
    log = CALL_LOG if log is None else log
    counts = defaultdict(int)
    for entry in log:
        counts[entry[0]] += 1
    if reset:
        log.clear()
    return dict(counts)


# --------------------------------------------------------------------------- #
# Pure-torch neighbour sampling kernels                                       #
# --------------------------------------------------------------------------- #


def _sample_in_edges(colptr: Tensor, dst_global: Tensor, k: int,
                     generator=None) -> Tuple[Tensor, Tensor]:
    r"""For every destination node in `dst_global`, picks up to `k` incoming
    edges uniformly without replacement (`k < 0`: all of them).
    Returns `(pos, seg)`: positions into the CSC `row` array and, for every
    picked edge, the index of its destination inside `dst_global`."""
    if dst_global.numel() == 0:
        e = torch.empty(0, dtype=torch.long)
        return e, e
    start = colptr[dst_global]
    deg = colptr[dst_global + 1] - start
    total = int(deg.sum())
    if total == 0:
        e = torch.empty(0, dtype=torch.long)
        return e, e
    seg = torch.repeat_interleave(torch.arange(dst_global.numel()), deg)
    seg_start = torch.cumsum(deg, 0) - deg
    offs = torch.arange(total) - torch.repeat_interleave(seg_start, deg)
    pos = torch.repeat_interleave(start, deg) + offs
    if k >= 0:
        # random key per candidate edge; sort by (segment, key); keep rank < k
        key = seg.to(torch.float64) + torch.rand(total, generator=generator,
                                                 dtype=torch.float64) * 0.5
        order = torch.argsort(key)
        pos, seg = pos[order], seg[order]
        keep = offs < k  # rank inside segment (segments stay contiguous)
        pos, seg = pos[keep], seg[keep]
    return pos, seg


class _NodeSet:
    r"""Ordered set of global node ids with global->local lookup (per type).
    Uses a dense `assoc` vector of size `num_nodes` (fine for an example;
    a scalable implementation would use a hash map)."""
    def __init__(self, num_nodes: int, seed: Tensor):
        self.assoc = torch.full((num_nodes, ), -1, dtype=torch.long)
        self.nodes = [torch.empty(0, dtype=torch.long)]
        self.count = 0
        self.add(seed, keep_duplicates_order=True)

    def add(self, glob: Tensor, keep_duplicates_order=False) -> Tensor:
        r"""Adds unseen ids in order of first appearance; returns the ids that
        were new."""
        if glob.numel() == 0:
            return glob
        if keep_duplicates_order:  # seeds: must be unique & in given order
            assert glob.unique().numel() == glob.numel(), \
                'non-disjoint sampling expects unique seeds'
            new = glob
        else:
            unseen = glob[self.assoc[glob] < 0]
            if unseen.numel() == 0:
                return unseen
            uniq, inv = torch.unique(unseen, return_inverse=True)
            first = torch.full((uniq.numel(), ), unseen.numel(),
                               dtype=torch.long)
            first = first.scatter_reduce(0, inv, torch.arange(unseen.numel()),
                                         reduce='amin')
            new = uniq[torch.argsort(first)]
        self.assoc[new] = torch.arange(self.count, self.count + new.numel())
        self.count += new.numel()
        self.nodes.append(new)
        return new

    def local(self, glob: Tensor) -> Tensor:
        return self.assoc[glob]

    def all(self) -> Tensor:
        return torch.cat(self.nodes)


class TorchNeighborSampler(BaseSampler):
    r"""Uniform neighbour sampler in pure PyTorch, for (FeatureStore,
    GraphStore) inputs.

    Args:
        data: `(feature_store, graph_store)`.
        num_neighbors: `List[int]` (homogeneous or same fan-out for every
            edge type) or `Dict[EdgeType, List[int]]`.
    """
    def __init__(
        self,
        data: Tuple[FeatureStore, GraphStore],
        num_neighbors: Union[List[int], Dict[Tuple[str, str, str], List[int]]],
        seed: Optional[int] = None,
    ):
        feature_store, graph_store = data
        self.generator = None
        if seed is not None:
            self.generator = torch.Generator().manual_seed(seed)
        edge_attrs = graph_store.get_all_edge_attrs()
        self.edge_types = list({attr.edge_type for attr in edge_attrs})
        self.is_hetero = self.edge_types != [None]

        if not self.is_hetero:
            # `GraphStore.csc()` returns (row, colptr, perm) for homogeneous
            # stores: the whole edge list is pulled and converted to CSC.
            self.row, self.colptr, self.perm = graph_store.csc()
            size = edge_attrs[0].size
            assert size is not None, "EdgeAttr.size must be set"
            self.num_nodes = max(size)
            assert isinstance(num_neighbors, (list, tuple))
            self.num_neighbors = list(num_neighbors)
        else:
            self.row_dict, self.colptr_dict, self.perm = graph_store.csc()
            node_types = set()
            for et in self.edge_types:
                node_types |= {et[0], et[-1]}
            self.node_types = sorted(node_types)
            self.num_nodes = {
                nt: remote_backend_utils.num_nodes(feature_store, graph_store,
                                                   nt)
                for nt in self.node_types
            }
            if isinstance(num_neighbors, dict):
                self.num_neighbors = {tuple(k): list(v)
                                      for k, v in num_neighbors.items()}
            else:
                self.num_neighbors = {
                    et: list(num_neighbors)
                    for et in self.edge_types
                }
            hops = {len(v) for v in self.num_neighbors.values()}
            assert len(hops) == 1
        self.num_hops = (len(self.num_neighbors) if not self.is_hetero else
                         len(next(iter(self.num_neighbors.values()))))

    # BaseSampler API ---------------------------------------------------------

    def sample_from_nodes(
        self,
        index: NodeSamplerInput,
        **kwargs,
    ) -> Union[SamplerOutput, HeteroSamplerOutput]:
        # `node_sample` sets `out.metadata = (input_id, seed_time)`.
        return node_sample(index, self._sample)

    def sample_from_edges(
        self,
        index: EdgeSamplerInput,
        neg_sampling: Optional[NegativeSampling] = None,
    ) -> Union[SamplerOutput, HeteroSamplerOutput]:
        # `edge_sample` draws negatives uniformly in [0, num_nodes), dedups the
        # seed endpoints (non-disjoint), calls `_sample` and sets `metadata`:
        #   binary/None: (input_id, edge_label_index, edge_label, time)
        #   triplet:     (input_id, src_index, dst_pos_index, dst_neg_index,
        #                 time)
        return edge_sample(index, self._sample, self.num_nodes, False, None,
                           neg_sampling)

    @property
    def edge_permutation(self):
        # Loader maps `e_id = perm[out.edge]`, i.e. back to the GraphStore's
        # original (COO) edge order.
        return self.perm

    # Sampling ----------------------------------------------------------------

    def _sample(self, seed, seed_time=None, **kwargs):
        if seed_time is not None:
            raise NotImplementedError('temporal sampling not supported')
        if isinstance(seed, dict):
            return self._hetero_sample(seed)
        return self._homo_sample(seed)

    def _homo_sample(self, seed: Tensor) -> SamplerOutput:
        seed = seed.to(torch.long)
        nodes = _NodeSet(self.num_nodes, seed)
        frontier = seed
        rows, cols, edges = [], [], []
        num_sampled_nodes, num_sampled_edges = [seed.numel()], []
        for k in self.num_neighbors:
            pos, seg = _sample_in_edges(self.colptr, frontier, k,
                                        self.generator)
            src = self.row[pos]
            dst = frontier[seg]
            new = nodes.add(src)
            rows.append(nodes.local(src))
            cols.append(nodes.local(dst))
            edges.append(pos)
            num_sampled_nodes.append(new.numel())
            num_sampled_edges.append(pos.numel())
            frontier = new
        cat = lambda xs: torch.cat(xs) if xs else torch.empty(  # noqa
            0, dtype=torch.long)
        return SamplerOutput(
            node=nodes.all(),
            row=cat(rows),
            col=cat(cols),
            edge=cat(edges),  # positions in CSC order (see edge_permutation)
            batch=None,
            num_sampled_nodes=num_sampled_nodes,
            num_sampled_edges=num_sampled_edges,
        )

    def _hetero_sample(self, seed_dict: Dict[str, Tensor]) -> HeteroSamplerOutput:
        node_sets = {
            nt: _NodeSet(self.num_nodes[nt],
                         seed_dict.get(nt, torch.empty(0, dtype=torch.long)).to(
                             torch.long))
            for nt in self.node_types
        }
        frontier = {nt: node_sets[nt].all() for nt in self.node_types}
        rows = defaultdict(list)
        cols = defaultdict(list)
        edges = defaultdict(list)
        num_sampled_nodes = {nt: [frontier[nt].numel()] for nt in self.node_types}
        num_sampled_edges = {et: [] for et in self.edge_types}
        for hop in range(self.num_hops):
            new_per_type = defaultdict(list)
            for et in self.edge_types:
                src_t, _, dst_t = et
                k = self.num_neighbors[et][hop]
                pos, seg = _sample_in_edges(self.colptr_dict[et],
                                            frontier[dst_t], k, self.generator)
                src = self.row_dict[et][pos]
                dst = frontier[dst_t][seg]
                new = node_sets[src_t].add(src)
                new_per_type[src_t].append(new)
                rows[et].append(node_sets[src_t].local(src))
                cols[et].append(node_sets[dst_t].local(dst))
                edges[et].append(pos)
                num_sampled_edges[et].append(pos.numel())
            for nt in self.node_types:
                new = (torch.cat(new_per_type[nt]) if new_per_type[nt] else
                       torch.empty(0, dtype=torch.long))
                num_sampled_nodes[nt].append(new.numel())
                frontier[nt] = new
        cat = lambda xs: torch.cat(xs) if xs else torch.empty(  # noqa
            0, dtype=torch.long)
        return HeteroSamplerOutput(
            node={nt: s.all() for nt, s in node_sets.items()},
            row={et: cat(rows[et]) for et in self.edge_types},
            col={et: cat(cols[et]) for et in self.edge_types},
            edge={et: cat(edges[et]) for et in self.edge_types},
            batch=None,
            num_sampled_nodes=num_sampled_nodes,
            num_sampled_edges=num_sampled_edges,
        )


# --------------------------------------------------------------------------- #
# Drop-in pure-torch kernel for the *stock* NeighborSampler                   #
# --------------------------------------------------------------------------- #


def torch_kernel_sample(self, seed, seed_time=None, **kwargs):
    r"""Replacement for `torch_geometric.sampler.NeighborSampler._sample`
    (pyg-lib / torch-sparse kernels) for the non-disjoint, non-temporal,
    unweighted, forward, non-induced case.  Used by `09_run_upstream_tests.py`
    to re-run PyG's own (FeatureStore, GraphStore) tests without pyg-lib.
    Works on the CSC the stock sampler already built (`colptr`/`row`,
    `colptr_dict`/`row_dict` keyed by 'src__rel__dst')."""
    from torch_geometric.sampler.base import SubgraphType
    if (seed_time is not None or self.disjoint
            or self.subgraph_type == SubgraphType.induced
            or getattr(self, 'sample_direction', 'forward') != 'forward'
            or getattr(self, 'edge_weight', None) is not None):
        raise NotImplementedError('torch_kernel_sample: unsupported option')

    if not isinstance(seed, dict):
        num_nodes = int(self.colptr.numel() - 1)
        seed = seed.to(torch.long)
        nodes = _NodeSet(max(num_nodes, int(self.row.max()) + 1
                             if self.row.numel() else num_nodes), seed)
        frontier, rows, cols, edges = seed, [], [], []
        nsn, nse = [seed.numel()], []
        for k in self.num_neighbors.get_mapped_values():
            pos, seg = _sample_in_edges(self.colptr, frontier, k)
            src, dst = self.row[pos], frontier[seg]
            new = nodes.add(src)
            rows.append(nodes.local(src))
            cols.append(nodes.local(dst))
            edges.append(pos)
            nsn.append(new.numel())
            nse.append(pos.numel())
            frontier = new
        cat = lambda xs: torch.cat(xs) if xs else torch.empty(  # noqa
            0, dtype=torch.long)
        return SamplerOutput(node=nodes.all(), row=cat(rows), col=cat(cols),
                             edge=cat(edges), batch=None,
                             num_sampled_nodes=nsn, num_sampled_edges=nse)

    num_neighbors = self.num_neighbors.get_mapped_values(self.edge_types)
    node_types = set(self.node_types) | {
        t for et in self.edge_types for t in (et[0], et[-1])}
    sizes = {}
    for nt in node_types:
        n = self.num_nodes.get(nt, 0) if isinstance(self.num_nodes, dict) \
            else 0
        for et in self.edge_types:
            rel = self.to_rel_type[et]
            if et[-1] == nt:
                n = max(n, self.colptr_dict[rel].numel() - 1)
            if et[0] == nt and self.row_dict[rel].numel() > 0:
                n = max(n, int(self.row_dict[rel].max()) + 1)
        sizes[nt] = n
    node_sets = {nt: _NodeSet(sizes[nt], seed.get(nt, torch.empty(
        0, dtype=torch.long)).to(torch.long)) for nt in node_types}
    frontier = {nt: s.all() for nt, s in node_sets.items()}
    rows, cols, edges = defaultdict(list), defaultdict(list), defaultdict(list)
    nsn = {nt: [frontier[nt].numel()] for nt in node_types}
    nse = {et: [] for et in self.edge_types}
    num_hops = self.num_neighbors.num_hops
    for hop in range(num_hops):
        new_per_type = defaultdict(list)
        for et in self.edge_types:
            rel = self.to_rel_type[et]
            k = num_neighbors[rel][hop]
            pos, seg = _sample_in_edges(self.colptr_dict[rel],
                                        frontier[et[-1]], k)
            src = self.row_dict[rel][pos]
            dst = frontier[et[-1]][seg]
            new = node_sets[et[0]].add(src)
            new_per_type[et[0]].append(new)
            rows[et].append(node_sets[et[0]].local(src))
            cols[et].append(node_sets[et[-1]].local(dst))
            edges[et].append(pos)
            nse[et].append(pos.numel())
        for nt in node_types:
            new = (torch.cat(new_per_type[nt]) if new_per_type[nt] else
                   torch.empty(0, dtype=torch.long))
            nsn[nt].append(new.numel())
            frontier[nt] = new
    cat = lambda xs: torch.cat(xs) if xs else torch.empty(  # noqa
        0, dtype=torch.long)
    return HeteroSamplerOutput(
        node={nt: s.all() for nt, s in node_sets.items()},
        row={et: cat(rows[et]) for et in self.edge_types},
        col={et: cat(cols[et]) for et in self.edge_types},
        edge={et: cat(edges[et]) for et in self.edge_types},
        batch=None, num_sampled_nodes=nsn, num_sampled_edges=nse)
