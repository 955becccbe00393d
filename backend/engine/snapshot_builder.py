"""Build a topology snapshot from any gnnstore graph store by streaming its edges twice.

Pass one counts in-degrees (and out-degrees for a CSR) chunk by chunk; pass two writes each
chunk's edges straight into memory-mapped ``.npy`` files at their sorted positions. Only the
per-node counters live in memory, never the edge list (let alone twice), so a graph bigger
than RAM can be snapshotted. The folder appears under ``<directory>/<version>/`` by an atomic
rename, so a reader never sees half a snapshot.
"""
from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from gnnstore.backend.engine.snapshot_folder import snapshot_path, staging_dir
from gnnstore.backend.engine.topology import (
    META_FILE,
    EdgeTopology,
    TopologySnapshot,
    edge_ends,
    index_dtype,
    write_meta,
)
from gnnstore.backend.engine.topology_kernels import (
    count_into,
    first_out_of_range,
    pointer_from_counts,
    scatter_into,
)
from gnnstore.common.disk import full_disk_as_error, preallocated_npy
from gnnstore.common.errors import PreconditionError
from gnnstore.common.graph_types import EdgeType, NodeType
from gnnstore.stores.base import DEFAULT_CHUNK_EDGES, BaseGraphStore

logger = logging.getLogger(__name__)


def built_snapshot(graph_store: BaseGraphStore, directory: str | os.PathLike) -> TopologySnapshot:
    """The snapshot of ``graph_store``'s current version, which another process (the primary)
    built: a replica never writes its primary's directory.

    Raises:
        PreconditionError: it is not built yet.
    """
    version = str(graph_store.version())
    target = snapshot_path(directory, version)
    if not (target / META_FILE).is_file():
        raise PreconditionError(f"the topology snapshot of graph {version!r} is not built yet: its primary builds it")
    return TopologySnapshot.open(target)


def build_snapshot(
    graph_store: BaseGraphStore,
    directory: str | os.PathLike,
    *,
    csr: bool = False,
    rebuild: bool = False,
    num_nodes: dict[NodeType | None, int] | None = None,
    chunk_size: int = DEFAULT_CHUNK_EDGES,
) -> TopologySnapshot:
    """Return the memory-mapped snapshot of ``graph_store``'s current version, building it if needed.

    An existing snapshot of the same version is reused unless ``rebuild`` is set (or ``csr`` is
    asked for and it has none); a rebuild replaces it atomically.

    Args:
        graph_store: the store to read; its ``edge_attrs()`` must carry sizes.
        directory: the snapshots folder (``<data_dir>/snapshots``).
        csr: also build the CSR, for sampling outgoing edges.
        rebuild: build again even when a snapshot of this version exists.
        num_nodes: node counts to use where larger than the edge sizes (e.g. from the id map,
            for node types whose highest ids have no edges).
        chunk_size: edges per chunk read from the store.

    Raises:
        PreconditionError: the store lists no edges and ``num_nodes`` names no node type, an
            edge type lacks a size, the store returns an id out of range,
            or changed while the snapshot was being built.
    """
    version = str(graph_store.version())
    target = snapshot_path(directory, version)
    if (target / META_FILE).is_file() and not rebuild:
        existing = TopologySnapshot.open(target)
        if not csr or all(topo.has_csr for topo in existing.edges.values()):
            logger.info("reusing topology snapshot %s", target)
            return existing
        rebuild = True
    started = time.perf_counter()
    counts, sizes = _node_counts(graph_store, num_nodes or {})
    with full_disk_as_error(directory, "topology snapshot"), staging_dir(directory, version, replace=rebuild) as tmp:
        edges = {
            et: _build_edge_type(graph_store, et, i, sizes[et], tmp, csr, chunk_size)
            for i, et in enumerate(sizes)
        }
        snapshot = TopologySnapshot(num_nodes=counts, edges=edges, version=version)
        write_meta(tmp, snapshot)
        if str(graph_store.version()) != version:
            raise PreconditionError(
                f"the graph changed while its snapshot {version!r} was being built; build again"
            )
    logger.info(
        "built topology snapshot %s: %d edge types, %d edges in %.1f s",
        target,
        len(edges),
        sum(t.num_edges for t in edges.values()),
        time.perf_counter() - started,
    )
    return TopologySnapshot.open(target)


def _node_counts(
    graph_store: BaseGraphStore, extra: dict[NodeType | None, int]
) -> tuple[dict[NodeType | None, int], dict[EdgeType | None, tuple[int, int]]]:
    """Node count per node type and ``(num_src, num_dst)`` per edge type, from the edge attrs."""
    sizes: dict[EdgeType | None, tuple[int, int]] = {}
    for attr in graph_store.edge_attrs():
        if attr.size is None:
            raise PreconditionError(f"edge type {attr.edge_type!r} has no size in the graph store")
        # Layouts of one edge type may carry different sizes; the widest covers them all.
        num_src, num_dst = sizes.get(attr.edge_type, (0, 0))
        sizes[attr.edge_type] = (max(num_src, int(attr.size[0])), max(num_dst, int(attr.size[1])))
    if not sizes and not extra:
        raise PreconditionError("the graph store holds no edge types and no node counts to snapshot")
    if None in sizes and len(sizes) > 1:
        raise PreconditionError(f"the graph store mixes edge type None with {list(sizes)}")
    counts: dict[NodeType | None, int] = {}
    for et, (num_src, num_dst) in sizes.items():
        src, dst = edge_ends(et)
        counts[src] = max(counts.get(src, 0), num_src)
        counts[dst] = max(counts.get(dst, 0), num_dst)
    for nt, n in extra.items():
        counts[nt] = max(counts.get(nt, 0), int(n))
    for et in sizes:
        src, dst = edge_ends(et)
        sizes[et] = (counts[src], counts[dst])
    return counts, sizes


def _build_edge_type(
    graph_store: BaseGraphStore,
    edge_type: EdgeType | None,
    position: int,
    size: tuple[int, int],
    folder: Path,
    csr: bool,
    chunk_size: int,
) -> EdgeTopology:
    """Count pass, then write pass, of one edge type into ``folder/e<position>.*.npy``."""
    num_src, num_dst = size
    in_deg = np.zeros(num_dst, np.int64)
    out_deg = np.zeros(num_src if csr else 0, np.int64)
    for row, col, _ in _chunks(graph_store, edge_type, size, chunk_size):
        count_into(in_deg, col)
        if csr:
            count_into(out_deg, row)
    colptr = pointer_from_counts(in_deg)
    del in_deg
    num_edges = int(colptr[-1])
    stem = folder / f"e{position}"
    np.save(f"{stem}.colptr.npy", colptr)
    csc_row = _open_output(f"{stem}.row.npy", index_dtype(num_src), num_edges)
    csc_e_id = _open_output(f"{stem}.e_id.npy", np.dtype(np.int64), num_edges)
    csc_cursor = colptr[:-1].copy()
    if csr:
        rowptr = pointer_from_counts(out_deg)
        del out_deg
        np.save(f"{stem}.rowptr.npy", rowptr)
        csr_col = _open_output(f"{stem}.col.npy", index_dtype(num_dst), num_edges)
        csr_e_id = _open_output(f"{stem}.csr_e_id.npy", np.dtype(np.int64), num_edges)
        csr_cursor = rowptr[:-1].copy()
    seen = 0
    for row, col, e_id in _chunks(graph_store, edge_type, size, chunk_size):
        seen += row.shape[0]
        if seen > num_edges:
            break
        scatter_into(csc_cursor, col, row, e_id, csc_row, csc_e_id)
        if csr:
            scatter_into(csr_cursor, row, col, e_id, csr_col, csr_e_id)
    if seen != num_edges:
        raise PreconditionError(
            f"edge type {edge_type!r} yielded {num_edges} edges, then {seen}: it changed while "
            "its snapshot was being built; build again"
        )
    for array in (csc_row, csc_e_id) + ((csr_col, csr_e_id) if csr else ()):
        array.flush()
    if not csr:
        return EdgeTopology(edge_type, num_src, num_dst, colptr, csc_row, csc_e_id)
    return EdgeTopology(
        edge_type, num_src, num_dst, colptr, csc_row, csc_e_id, rowptr, csr_col, csr_e_id
    )


def _chunks(
    graph_store: BaseGraphStore,
    edge_type: EdgeType | None,
    size: tuple[int, int],
    chunk_size: int,
) -> Iterator[list[np.ndarray]]:
    """The store's ``(row, col, e_id)`` chunks as int64 numpy arrays, ids checked against ``size``."""
    for row, col, e_id in graph_store.iter_edge_index(edge_type, chunk_size):
        arrays = [np.asarray(ids, dtype=np.int64) for ids in (row, col, e_id)]
        for name, ids, bound in (("source", arrays[0], size[0]), ("destination", arrays[1], size[1])):
            bad = first_out_of_range(ids, bound)
            if bad is not None:
                raise PreconditionError(
                    f"edge type {edge_type!r}: the store returned {name} id {bad}, outside its "
                    f"size [0, {bound})"
                )
        yield arrays


def _open_output(file: str, dtype: np.dtype, length: int) -> np.ndarray:
    """A writable ``.npy`` memory map of ``length`` entries."""
    return preallocated_npy(file, dtype, (length,))
