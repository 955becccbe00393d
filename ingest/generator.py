"""Synthetic power-law graphs with planted classes, for tests, demos and benchmarks.

The homogeneous generator is a degree-corrected stochastic block model in the Chung-Lu manner:
each node draws a Pareto weight for its out-degree and one for its in-degree, each edge picks its
source by out-weight and, with probability ``homophily``, a destination of the same class by
in-weight (otherwise any node by in-weight). Degrees are therefore heavy-tailed and most edges
stay inside a class. Features are the node's class centroid plus Gaussian noise, weak enough that
a linear probe on features alone is well above chance but far from perfect, so neighbours help.
Everything is vectorised numpy and deterministic under ``seed``.
"""
from __future__ import annotations

import numpy as np
import torch
from torch_geometric.data import Data, HeteroData

from gnnstore.common.errors import InvalidRequestError

IN_DEGREE_EXPONENT = 2.5  # power-law exponent of in-degrees (citation graphs: ~2-3)
OUT_DEGREE_EXPONENT = 3.0  # out-degrees are less skewed than in-degrees in most real graphs
CENTROID_SCALE = 0.25  # per-feature class signal against unit noise
FEATURE_CHUNK_BYTES = 64 << 20  # features are finished this many bytes at a time


def generate_graph(
    num_nodes: int,
    avg_degree: float,
    num_features: int,
    num_classes: int,
    *,
    seed: int = 0,
    homophily: float = 0.8,
    train_ratio: float = 0.6,
    val_ratio: float = 0.2,
    out_degree_exponent: float = OUT_DEGREE_EXPONENT,
) -> Data:
    """A directed power-law graph with planted classes and class-correlated features.

    Args:
        num_nodes: number of nodes ``N``.
        avg_degree: mean out-degree; the graph has ``round(N * avg_degree)`` edges (duplicates
            and self-loops are possible, as in real crawls).
        num_features: width of the float32 feature matrix ``x``.
        num_classes: number of planted classes (labels ``y``, int64).
        seed: the generator is a pure function of its arguments and this seed.
        homophily: probability that an edge stays inside its source's class (default 0.8).
        train_ratio: share of nodes in ``train_mask`` (default 0.6).
        val_ratio: share of nodes in ``val_mask`` (default 0.2); the rest is ``test_mask``.
        out_degree_exponent: power-law exponent of the out-degree weights (> 1; default 3.0,
            mildly skewed). Lower is more skewed: near 2 a few hubs are the source of most
            edges, as in web and social graphs, so the nodes neighbour sampling reaches
            concentrate on them (what a degree-based feature cache relies on).

    Returns:
        ``Data(x, y, edge_index, train_mask, val_mask, test_mask)`` with ``num_nodes`` set.

    Raises:
        InvalidRequestError: a size or ratio out of range.
    """
    _check_sizes(num_nodes, avg_degree, num_features, num_classes)
    if not 0.0 <= homophily <= 1.0:
        raise InvalidRequestError(f"homophily must be in [0, 1], got {homophily}")
    if train_ratio < 0 or val_ratio < 0 or train_ratio + val_ratio > 1:
        raise InvalidRequestError(
            f"train_ratio + val_ratio must be within [0, 1], got {train_ratio} + {val_ratio}"
        )
    if not out_degree_exponent > 1.0:
        raise InvalidRequestError(f"out_degree_exponent must be > 1, got {out_degree_exponent}")
    rng = np.random.default_rng(seed)
    y = _class_labels(rng, num_nodes, num_classes)
    src, dst = _planted_edges(
        rng, y, num_classes, round(num_nodes * avg_degree), homophily, out_degree_exponent
    )
    x = _class_features(rng, y, num_classes, num_features)
    train_mask, val_mask, test_mask = _split_masks(rng, num_nodes, train_ratio, val_ratio)
    return Data(
        x=torch.from_numpy(x),
        y=torch.from_numpy(y),
        edge_index=torch.from_numpy(np.stack([src, dst])),
        train_mask=torch.from_numpy(train_mask),
        val_mask=torch.from_numpy(val_mask),
        test_mask=torch.from_numpy(test_mask),
        num_nodes=num_nodes,
    )


def generate_hetero_graph(
    num_papers: int = 200,
    num_authors: int = 120,
    num_institutions: int = 15,
    *,
    num_features: int = 16,
    num_classes: int = 4,
    seed: int = 0,
) -> HeteroData:
    """A small academic graph: 3 node types, 6 edge types (reverse edges, two author→paper).

    Node types ``paper`` (``x``, ``y``, three masks), ``author`` (``x``) and ``institution``
    (``x``, int64 ``year``). Edge types: ``paper cites paper``, ``author writes paper`` and its
    reverse ``paper rev_writes author``, ``author reviews paper`` (a second relation between the
    same pair), ``author affiliated_with institution`` and its reverse.
    """
    for name, value in (("num_authors", num_authors), ("num_institutions", num_institutions)):
        if value < 1:
            raise InvalidRequestError(f"{name} must be >= 1, got {value}")
    papers = generate_graph(num_papers, 4.0, num_features, num_classes, seed=seed)
    rng = np.random.default_rng(seed + 1)
    data = HeteroData()
    for attr in ("x", "y", "train_mask", "val_mask", "test_mask"):
        data["paper"][attr] = papers[attr]
    data["author"].x = torch.from_numpy(
        rng.standard_normal((num_authors, num_features), dtype=np.float32)
    )
    data["institution"].x = torch.from_numpy(
        rng.standard_normal((num_institutions, 2), dtype=np.float32)
    )
    data["institution"].year = torch.from_numpy(rng.integers(1900, 2024, num_institutions))
    writes = _bipartite(rng, num_authors, num_papers, 3 * num_papers)
    reviews = _bipartite(rng, num_authors, num_papers, num_papers)
    affiliated = np.stack([np.arange(num_authors), rng.integers(0, num_institutions, num_authors)])
    data["paper", "cites", "paper"].edge_index = papers.edge_index
    data["author", "writes", "paper"].edge_index = torch.from_numpy(writes)
    data["paper", "rev_writes", "author"].edge_index = torch.from_numpy(writes[::-1].copy())
    data["author", "reviews", "paper"].edge_index = torch.from_numpy(reviews)
    data["author", "affiliated_with", "institution"].edge_index = torch.from_numpy(affiliated)
    data["institution", "rev_affiliated_with", "author"].edge_index = torch.from_numpy(
        affiliated[::-1].copy()
    )
    return data


def _check_sizes(num_nodes: int, avg_degree: float, num_features: int, num_classes: int) -> None:
    """Reject sizes the generator cannot honour, naming the argument and its value."""
    if num_nodes < 1:
        raise InvalidRequestError(f"num_nodes must be >= 1, got {num_nodes}")
    if avg_degree < 0:
        raise InvalidRequestError(f"avg_degree must be >= 0, got {avg_degree}")
    if num_features < 1:
        raise InvalidRequestError(f"num_features must be >= 1, got {num_features}")
    if not 1 <= num_classes <= num_nodes:
        raise InvalidRequestError(
            f"num_classes must be in [1, num_nodes={num_nodes}], got {num_classes}"
        )


def _pareto_weights(rng: np.random.Generator, n: int, exponent: float) -> np.ndarray:
    """Pareto(``exponent``) weights >= 1: sampling by them gives a power-law degree sequence."""
    return (1.0 - rng.random(n)) ** (-1.0 / (exponent - 1.0))


def _class_labels(rng: np.random.Generator, num_nodes: int, num_classes: int) -> np.ndarray:
    """Labels with mildly unequal class sizes; every class has at least one node."""
    share = rng.dirichlet(np.full(num_classes, 4.0))
    y = rng.choice(num_classes, size=num_nodes, p=share)
    y[rng.permutation(num_nodes)[:num_classes]] = np.arange(num_classes)
    return y.astype(np.int64)


def _planted_edges(
    rng: np.random.Generator,
    y: np.ndarray,
    num_classes: int,
    num_edges: int,
    homophily: float,
    out_degree_exponent: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Chung-Lu edges biased into the source's class: ``(src, dst)`` int64 arrays.

    Degrees are drawn as multinomial counts over the weights and the destinations shuffled onto
    the sources, which is linear time (sampling each edge by a CDF search is ~5x slower at 25M).
    Edges come grouped by source class, then by source id.
    """
    num_nodes = len(y)
    by_class = np.argsort(y, kind="stable")
    bounds = np.searchsorted(y[by_class], np.arange(num_classes + 1))
    out_weight = _pareto_weights(rng, num_nodes, out_degree_exponent)
    out_count = rng.multinomial(num_edges, _normalised(out_weight))
    src = np.repeat(by_class, out_count[by_class])
    in_weight = _pareto_weights(rng, num_nodes, IN_DEGREE_EXPONENT)
    inside = rng.random(num_edges) < homophily
    dst = np.empty(num_edges, dtype=np.int64)
    edge_bounds = np.concatenate([[0], np.cumsum(out_count[by_class])])[bounds]
    for c in range(num_classes):
        members = by_class[bounds[c] : bounds[c + 1]]
        lo, hi = edge_bounds[c], edge_bounds[c + 1]
        chosen = inside[lo:hi]
        counts = rng.multinomial(int(chosen.sum()), _normalised(in_weight[members]))
        dst[lo:hi][chosen] = rng.permutation(np.repeat(members, counts))
    counts = rng.multinomial(int((~inside).sum()), _normalised(in_weight))
    dst[~inside] = rng.permutation(np.repeat(np.arange(num_nodes), counts))
    return src.astype(np.int64), dst


def _normalised(weights: np.ndarray) -> np.ndarray:
    """Probabilities proportional to ``weights`` (float64, summing to 1 within rounding)."""
    return weights / weights.sum()


def _class_features(
    rng: np.random.Generator, y: np.ndarray, num_classes: int, num_features: int
) -> np.ndarray:
    """Float32 features: the class centroid plus unit Gaussian noise."""
    centroids = rng.standard_normal((num_classes, num_features), dtype=np.float32)
    x = rng.standard_normal((len(y), num_features), dtype=np.float32)
    # a chunk of rows at a time: ``centroids[y]`` whole would be a second copy of the features
    step = max(1, FEATURE_CHUNK_BYTES // (4 * num_features))
    for start in range(0, len(y), step):
        x[start : start + step] += CENTROID_SCALE * centroids[y[start : start + step]]
    return x


def _split_masks(
    rng: np.random.Generator, num_nodes: int, train_ratio: float, val_ratio: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Disjoint boolean train/val/test masks over a random permutation of the nodes."""
    order = rng.permutation(num_nodes)
    num_train, num_val = int(num_nodes * train_ratio), int(num_nodes * val_ratio)
    masks = [np.zeros(num_nodes, dtype=bool) for _ in range(3)]
    masks[0][order[:num_train]] = True
    masks[1][order[num_train : num_train + num_val]] = True
    masks[2][order[num_train + num_val :]] = True
    return masks[0], masks[1], masks[2]


def _bipartite(
    rng: np.random.Generator, num_src: int, num_dst: int, num_edges: int
) -> np.ndarray:
    """``[2, num_edges]`` int64 edges between two node types, destinations by power-law weight."""
    cdf = np.cumsum(_pareto_weights(rng, num_dst, IN_DEGREE_EXPONENT))
    dst = np.searchsorted(cdf, rng.random(num_edges) * cdf[-1], side="right")
    dst = np.minimum(dst, num_dst - 1)
    return np.stack([rng.integers(0, num_src, num_edges), dst]).astype(np.int64)
