"""Everything a server serves: stores, a sampler factory over the graph, and the feature read tier.

The embedded default opens ``data_dir`` (LadybugDB or Kùzu graph, RocksDB features, id map) and samples from
a topology snapshot. With ``graph_backend = "neo4j"`` the graph lives in Neo4j and ``data_dir``
holds the features and the id map; sampling reads a snapshot exported from Neo4j
(``neo4j_sampling = "snapshot"``) or queries Neo4j per batch (``"live"``). A missing or
unreadable data directory stops the server here, before any port is bound, with a message that
says what to do.
"""
from __future__ import annotations

import dataclasses
import logging
import threading
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gnnstore.backend.engine.degree_ranking import DegreeRanking
from gnnstore.backend.engine.seeds import SeedSampler
from gnnstore.backend.engine.snapshot_builder import build_snapshot, built_snapshot
from gnnstore.backend.engine.snapshot_sampler import SnapshotSampler
from gnnstore.backend.engine.temporal_index import TemporalIndexes
from gnnstore.backend.engine.topology import edge_ends
from gnnstore.backend.engine.weight_index import WeightIndexes
from gnnstore.backend.engine.work_budget import GraphBounds
from gnnstore.backend.features.feature_tier import FeatureTier
from gnnstore.backend.features.memory_limit import MemoryLimit, memory_limit
from gnnstore.backend.features.resident_arrays import ROW_CACHE_SHARE, memory_left, resident_budget, resident_bytes_now
from gnnstore.backend.features.tiered_feature_store import TieredFeatureStore
from gnnstore.backend.service.reply_memory import SHARE as REPLY_SHARE
from gnnstore.backend.service.reply_memory import ReplyMemory
from gnnstore.backend.service.served_graph import (
    UNKNOWN_EDGE_COUNT,
    GraphSummary,
    SampledVersion,
    SamplerRequest,
    VersionLookup,
)
from gnnstore.backend.versions.graph_versions import GraphVersions, GraphView
from gnnstore.backend.versions.write_log import WriteLog
from gnnstore.common.errors import (
    CommandInputError,
    GnnStoreError,
    InvalidRequestError,
    NotFoundError,
    PreconditionError,
)
from gnnstore.common.graph_types import EdgeType, NodeType
from gnnstore.config import ServerConfig, embedded_engine
from gnnstore.stores.data_dir import (
    EDGE_FILES,
    FEATURE_TIER,
    GRAPH_WRITES,
    SNAPSHOTS,
    Stores,
    missing_parts,
    open_stores,
)
from gnnstore.stores.edge_file_graph_store import EdgeFileGraphStore
from gnnstore.stores.embedded_graph_store import EmbeddedGraphStore
from gnnstore.stores.id_map import IdMap

if TYPE_CHECKING:  # the neo4j extra's modules: imported where a Neo4j graph is opened
    from gnnstore.stores.neo4j_attached import AttachedNeo4jGraph, AttachedSchema
    from gnnstore.stores.neo4j_graph_store import Neo4jGraphStore

logger = logging.getLogger(__name__)


@dataclass
class ServedData:
    """The open stores, the graph versions to sample, and the feature reads' front door.

    Attributes:
        stores: feature store, graph store and id map (``close()`` releases them).
        summary: node and edge counts and the graph version (of the snapshot as built).
        sampling: the version a request samples, with its bounds and sampler factory.
        feature_reader: reads from the read tier, writes through to RocksDB.
        memory: the memory this server may use, which sized the tier's budget.
        replies: what replies' rows may take of that memory at once.
        ranking: nodes by out-degree for clients' hot sets (``None`` under live sampling).
        versions: the snapshot's versions, which graph writes add to (``None`` under live
            sampling, which takes no writes).
    """

    stores: Stores
    summary: GraphSummary
    sampling: VersionLookup
    feature_reader: TieredFeatureStore
    memory: MemoryLimit
    replies: ReplyMemory
    ranking: DegreeRanking | None = None
    versions: GraphVersions | None = None

    @property
    def graph_backend(self) -> str:
        """What the graph is kept in: ``ladybug``, ``kuzu``, ``edge-files`` or ``neo4j``."""
        graph = self.stores.graph_store
        if isinstance(graph, EmbeddedGraphStore):
            return graph.engine.name
        return EDGE_FILES if isinstance(graph, EdgeFileGraphStore) else "neo4j"

    def summary_now(self) -> GraphSummary:
        """``summary`` with the newest graph version's node and edge counts."""
        if self.versions is None or not self.versions.newest:
            return self.summary
        view = self.versions.view()
        return dataclasses.replace(
            self.summary,
            num_nodes=dict(view.snapshot.num_nodes),
            num_edges={et: topology.num_edges for et, topology in view.snapshot.edges.items()},
            graph_version=view.graph_version,
        )

    @property
    def graph_store(self) -> Any:
        """The graph store (an embedded database, edge files or Neo4j)."""
        return self.stores.graph_store

    @property
    def id_map(self) -> IdMap:
        """The persistent key <-> id map."""
        return self.stores.id_map

    def close(self) -> None:
        """Close the stores."""
        self.stores.close()


def open_served_data(config: ServerConfig) -> ServedData:
    """Open the stores named by ``config``, then the sampler and the feature tier.

    Raises:
        PreconditionError: the data directory is missing, incomplete or unreadable (the
            message says to run ``gnnstore ingest``), or Neo4j holds no edges.
    """
    stores = _open_stores(config)
    try:
        counts = _node_counts(stores)
        ranking = versions = None
        if config.graph_backend == "neo4j" and config.neo4j_sampling == "live":
            summary, sampling = _live(stores.graph_store, counts, config.max_fanout)
        else:
            summary, sampling, ranking, versions = _snapshot(stores, config, counts)
        limit, in_use, configured = memory_limit(), resident_bytes_now(), config.resident_feature_bytes
        replies = ReplyMemory(memory_left(limit, in_use) // REPLY_SHARE)
        tier = FeatureTier(
            config.data_dir / FEATURE_TIER, resident_budget(configured, limit, in_use), limit.bytes // 2,
            cache_bytes=resident_budget(configured, limit, in_use, ROW_CACHE_SHARE),
        )
        if config.replica:
            tier.follow()  # the primary exports the tier
        else:
            tier.refresh(stores.feature_store)
    except BaseException:
        stores.close()
        raise
    return ServedData(
        stores, summary, sampling, TieredFeatureStore(stores.feature_store, tier), limit, replies, ranking, versions
    )


def _open_stores(config: ServerConfig) -> Stores:
    data_dir = config.data_dir
    hint = f"create it with `gnnstore ingest <source> --data-dir {data_dir}`"
    if not data_dir.is_dir():
        raise CommandInputError(f"data directory {data_dir} does not exist; {hint}")
    missing = missing_parts(data_dir, graph_elsewhere=config.graph_backend == "neo4j")
    if missing:
        raise CommandInputError(
            f"data directory {data_dir} lacks {', '.join(missing)}: it was not written by "
            f"`gnnstore ingest` or the ingest did not finish; {hint}"
        )
    try:
        if config.graph_backend != "neo4j":
            return open_stores(data_dir, read_only=config.read_only, follow=config.replica,
                               engine=embedded_engine(config.graph_backend))
        return _open_neo4j_stores(config)
    except GnnStoreError:
        raise  # the stores' own message names the part and the fix
    except Exception as exc:  # a corrupt database raises the database's own error type
        raise PreconditionError(
            f"data directory {data_dir} cannot be opened ({type(exc).__name__}: {exc}); it may be "
            f"corrupt: {hint} into a fresh directory"
        ) from exc


def _open_neo4j_stores(config: ServerConfig) -> Stores:
    """RocksDB features and id map from ``data_dir``, the graph from Neo4j (checked to answer):
    gnnstore's own schema, or the user's as ``gnnstore attach neo4j`` read it (live only)."""
    from gnnstore.stores.neo4j_attached import AttachedSchema  # the neo4j extra: only a Neo4j graph needs it
    from gnnstore.stores.neo4j_graph_store import Neo4jGraphStore

    auth = None if config.neo4j_password is None else (config.neo4j_user, config.neo4j_password)
    attached = AttachedSchema.load(config.data_dir)
    if attached is not None:
        return _open_attached(config, auth, attached)
    graph = Neo4jGraphStore(config.neo4j_uri, auth)
    try:
        graph.verify()
    except BaseException:
        graph.close()
        raise
    logger.info("graph in Neo4j at %s as %s", config.neo4j_uri, config.neo4j_user)
    return open_stores(config.data_dir, read_only=config.read_only, follow=config.replica, graph_store=graph)


def _open_attached(config: ServerConfig, auth: tuple[str, str] | None, schema: AttachedSchema) -> Stores:
    """An attached data directory whose graph is sampled live in the user's Neo4j."""
    if config.neo4j_sampling != "live":
        raise PreconditionError(
            f"data directory {config.data_dir} was attached to a Neo4j graph in its owner's schema: serve its "
            "snapshot with the default graph backend (embedded), or sample Neo4j live with --neo4j-sampling live"
        )
    from gnnstore.stores.neo4j_attached import AttachedNeo4jGraph

    graph = AttachedNeo4jGraph(config.neo4j_uri, auth, schema)
    try:
        graph.verify()
    except BaseException:
        graph.close()
        raise
    stores = open_stores(config.data_dir, read_only=config.read_only, graph_store=graph)
    graph.id_map = stores.id_map
    logger.info("attached graph in Neo4j at %s, sampled live in its own schema", config.neo4j_uri)
    return stores


def _snapshot(
    stores: Stores, config: ServerConfig, counts: dict[NodeType | None, int]
) -> tuple[GraphSummary, VersionLookup, DegreeRanking, GraphVersions]:
    """Sampling from a memory-mapped snapshot of the graph store's current version and the graph
    writes logged over it (temporal sampling by node or edge times, weighted sampling by edge
    weights, both read from the feature store, one per attribute per version)."""
    snapshot = (
        built_snapshot(stores.graph_store, config.data_dir / SNAPSHOTS) if config.replica
        else build_snapshot(stores.graph_store, config.data_dir / SNAPSHOTS, num_nodes=counts)
    )
    log = WriteLog(config.data_dir / GRAPH_WRITES, snapshot.version, read_only=config.read_only or config.replica)
    versions = GraphVersions(snapshot, log, replica=config.replica)
    indexes = _IndexesPerVersion(stores.feature_store)

    def sampling(version: int | None) -> SampledVersion:
        view = versions.view(version)

        def make_sampler(request: SamplerRequest) -> SeedSampler:
            temporal, weighted = request.temporal, request.weight_attr
            temporal_indexes, weight_indexes = indexes.of(view) if temporal or weighted is not None else (None, None)
            return SnapshotSampler(
                view.engine, request.num_neighbors, replace=request.replace, disjoint=request.disjoint,
                seed=request.seed, make_ids=request.make_ids,
                temporal=None if temporal is None else temporal_indexes.get(temporal.time_attr),
                temporal_strategy="uniform" if temporal is None else temporal.strategy,
                weights=None if weighted is None else weight_indexes.get(weighted),
            )

        return SampledVersion(view.graph_version, view.bounds, make_sampler, newest=view.graph_version == versions.newest)

    summary = GraphSummary(
        dict(snapshot.num_nodes),
        {et: topology.num_edges for et, topology in snapshot.edges.items()},
        snapshot.version,
        "snapshot",
    )
    return summary, sampling, DegreeRanking(snapshot), versions


class _IndexesPerVersion:
    """The temporal and weight indexes of each graph version in memory, made on first use and
    dropped with the version (each is a copy of the version's CSC, sorted or summed)."""

    def __init__(self, feature_store: Any) -> None:
        self._features = feature_store
        self._lock = threading.Lock()
        self._of: weakref.WeakKeyDictionary[GraphView, tuple[TemporalIndexes, WeightIndexes]] = (
            weakref.WeakKeyDictionary()
        )

    def of(self, view: GraphView) -> tuple[TemporalIndexes, WeightIndexes]:
        """``view``'s temporal and weight indexes (each built when first asked for)."""
        with self._lock:
            found = self._of.get(view)
            if found is None:
                found = self._of[view] = (
                    TemporalIndexes(view.engine, self._features), WeightIndexes(view.engine, self._features)
                )
            return found


def _live(
    graph_store: Neo4jGraphStore | AttachedNeo4jGraph, counts: dict[NodeType | None, int], max_fanout: int
) -> tuple[GraphSummary, VersionLookup]:
    """Sampling inside Neo4j, one query per hop and edge type: every batch sees the graph now."""
    edge_types: list[EdgeType | None] = []
    for attr in graph_store.edge_attrs():
        src, dst = edge_ends(attr.edge_type)
        counts[src] = max(counts.get(src, 0), int(attr.size[0]))
        counts[dst] = max(counts.get(dst, 0), int(attr.size[1]))
        if attr.edge_type not in edge_types:
            edge_types.append(attr.edge_type)
    if not edge_types:
        raise PreconditionError("Neo4j holds no edges to sample; run `gnnstore ingest` first")

    def make_sampler(request: SamplerRequest) -> SeedSampler:
        # ``make_ids`` goes unused: the live sampler's arrays come out of Cypher replies and
        # are copied into a reply segment like any other.
        if request.replace or request.disjoint or request.temporal is not None or request.weight_attr is not None:
            raise InvalidRequestError(
                "live Neo4j sampling is uniform, without replacement, not disjoint and not temporal; "
                "serve with neo4j_sampling = 'snapshot' for replace, disjoint, temporal or weighted sampling"
            )
        from gnnstore.backend.engine.neo4j_live_sampling import LiveSampler

        return LiveSampler(graph_store, request.num_neighbors)

    summary = GraphSummary(
        counts, {et: UNKNOWN_EDGE_COUNT for et in edge_types}, str(graph_store.version()), "live"
    )
    live = SampledVersion(0, GraphBounds(summary.num_nodes, summary.num_edges, unknown_degree=max_fanout), make_sampler)

    def sampling(version: int | None) -> SampledVersion:
        if version:
            raise NotFoundError(
                f"graph version {version} does not exist: live Neo4j sampling reads the database as it is now"
            )
        return live

    return summary, sampling


def _node_counts(stores: Stores) -> dict[NodeType | None, int]:
    """Node count per node type from the id map and the feature rows (types may lack edges)."""
    counts = {nt: stores.id_map.num_nodes(nt) for nt in stores.id_map.node_types()}
    for schema in stores.feature_store.tensor_schema():
        if schema.group_name is None or isinstance(schema.group_name, str):
            counts[schema.group_name] = max(counts.get(schema.group_name, 0), schema.shape[0])
    return counts
