"""``RemoteNeighborSampler``: a PyG BaseSampler whose sampling runs on the gnnstore server.

The server runs PyG's ``node_sample`` / ``edge_sample`` (``backend/engine/seeds.py``) around
its sampling engine, so a batch's fields, metadata and negatives are built as PyG's
``NeighborSampler`` builds them, and
the negatives are drawn against the server's authoritative node counts. Ids in the output:

* ``node`` (``batch.n_id``) — **global** node ids, the seeds first and in seed order;
* ``row``/``col`` (``batch.edge_index``) — **local**: positions in ``node`` of each type;
* ``edge`` (``batch.e_id``) — **global** edge ids (positions in the stored edge list);
* ``edge_label_index``, ``src_index``, ``dst_pos_index``, ``dst_neg_index`` — **local**. The
  global id of a negative is ``n_id[dst_neg_index]`` (heterogeneous: ``batch[dst].n_id[...]``).

Given the loader's feature store (``feature_store=fs``), each sampling RPC also returns the
sampled nodes' feature rows, and ``fs.multi_get_tensor(index=n_id)`` is answered from them:
one round trip per mini-batch. On the server's host the reply's arrays come through a
shared-memory segment the call lends the server (``Connection.reply_segments``), and the
batch's tensors are views of it; from elsewhere a large reply's arrays come from the server's
data port (``Connection.fetch_payload``), read straight into the buffer the tensors view.
"""
from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch_geometric.sampler import (
    BaseSampler,
    EdgeSamplerInput,
    HeteroSamplerOutput,
    NegativeSampling,
    NodeSamplerInput,
    NumNeighbors,
    SamplerOutput,
)
from torch_geometric.typing import DEFAULT_REL, EdgeType

from gnnstore.client.admin import server_info
from gnnstore.client.channel import Connection
from gnnstore.client.received_rows import received_rows_from_proto
from gnnstore.client.remote_feature_store import RemoteFeatureStore
from gnnstore.client.remote_graph_store import RemoteGraphStore
from gnnstore.client.sampler_wire import edge_input_to_proto, node_input_to_proto, output_from_proto
from gnnstore.common.call_seed import seeded_call_seed
from gnnstore.common.errors import InvalidRequestError
from gnnstore.common.temporal import TEMPORAL_STRATEGIES
from gnnstore.proto import graph_pb2
from gnnstore.proto.sampling_options import options_to_proto

logger = logging.getLogger(__name__)


class RemoteNeighborSampler(BaseSampler):
    """Uniform, temporal or weighted neighbour sampling on a gnnstore server, as PyG's
    ``NeighborSampler`` samples.

    Works with ``NodeLoader(data=(fs, gs), node_sampler=...)``, ``LinkLoader``,
    ``NeighborLoader(..., neighbor_sampler=...)`` and ``LinkNeighborLoader(...,
    neighbor_sampler=...)``, with ``num_workers`` > 0 under fork and spawn.

    Args:
        address_or_client: ``"host:port"``, a :class:`Connection`, or a remote store whose
            connection to share.
        num_neighbors: fanouts per hop (-1 = all neighbours): one list for every edge type, a
            dict edge type → list, or PyG's ``NumNeighbors``.
        replace: sample with replacement.
        disjoint: each seed gets its own subtree (``batch.batch`` holds the seed index).
        seed: ``None`` draws each request's seed from torch's generator (``torch.manual_seed``
            repeats a run, per worker as the DataLoader seeds them); an int makes request ``i``
            of each worker use a seed derived from ``(seed, worker, i)``. A ``Prefetcher``
            making batches on several threads claims each batch's seed in loader order
            (``claim_seed``, then passes it to ``sample_nodes`` / ``sample_edges``; with
            ``seed=None`` from its epoch's own random stream), so thread timing never changes
            a batch.
        feature_store: the loader's :class:`RemoteFeatureStore`; its rows for the sampled
            nodes then travel in the sampling RPC.
        timeout: deadline of each sampling RPC (default: the connection's).
        time_attr: sample temporally by this stored node attribute (one integer per node) or,
            when no node type has it, edge attribute (one integer per edge), as PyG's
            ``NeighborSampler(time_attr=...)``: a node reached from a seed has only neighbours
            (edges) no later than the seed's time (the loader's ``input_time`` or
            ``edge_label_time``, else the seed's own node time). Always disjoint, as in PyG. The
            server sorts its graph by that attribute once (and again after a Put changes it);
            the times never travel to the trainer.
        temporal_strategy: ``'uniform'`` (draw among the allowed neighbours) or ``'last'`` (the
            ``k`` latest of them).
        weight_attr: sample in proportion to this stored edge attribute (one finite weight >= 0
            per edge), as PyG's ``NeighborSampler(weight_attr=...)``: edges of weight 0 are never
            picked, edge types without it are sampled uniformly, and the weights stay on the
            server. Not together with ``time_attr``.

    Graph writes (``GraphWriter``) make new graph versions. The sampler reads one version: the
    newest when it first samples, until ``switch_version()`` moves it (a ``Prefetcher`` does
    that as each epoch begins), so every batch of an epoch comes from one graph. Call
    ``switch_version()`` before the loader starts worker processes, so they share the version.
    """

    def __init__(
        self,
        address_or_client: str | Connection | RemoteFeatureStore | RemoteGraphStore,
        num_neighbors: Sequence[int] | Mapping[EdgeType, Sequence[int]] | NumNeighbors,
        *,
        replace: bool = False,
        disjoint: bool = False,
        seed: int | None = None,
        feature_store: RemoteFeatureStore | None = None,
        timeout: float | None = None,
        time_attr: str | None = None,
        temporal_strategy: str = "uniform",
        weight_attr: str | None = None,
    ) -> None:
        self.connection = _connection(address_or_client)
        self.num_neighbors = _plain_num_neighbors(num_neighbors)
        self.replace = bool(replace)
        if time_attr is not None and (not isinstance(time_attr, str) or not time_attr):
            raise InvalidRequestError(f"time_attr must be a non-empty str or None, got {time_attr!r}")
        if temporal_strategy not in TEMPORAL_STRATEGIES:
            raise InvalidRequestError(
                f"temporal_strategy must be one of {TEMPORAL_STRATEGIES}, got {temporal_strategy!r}"
            )
        if weight_attr is not None and (not isinstance(weight_attr, str) or not weight_attr):
            raise InvalidRequestError(f"weight_attr must be a non-empty str or None, got {weight_attr!r}")
        if weight_attr is not None and time_attr is not None:
            raise InvalidRequestError("weighted and temporal sampling cannot be combined; choose one")
        self.time_attr = time_attr
        self.temporal_strategy = temporal_strategy
        self.weight_attr = weight_attr
        self.disjoint = bool(disjoint) or time_attr is not None  # as PyG: temporal means disjoint
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise InvalidRequestError(f"seed must be an int or None, got {seed!r}")
        self.seed = seed
        if feature_store is not None and not isinstance(feature_store, RemoteFeatureStore):
            raise InvalidRequestError(
                f"feature_store must be a RemoteFeatureStore, got {type(feature_store).__name__}"
            )
        self.feature_store = feature_store
        self.timeout = timeout
        self.claimed = 0
        """Request seeds claimed so far in this process (with ``seed``, the next one's number)."""
        self._claim_lock = threading.Lock()
        self._canonical_pairs: dict[tuple[str, str], EdgeType] = {}
        """``(src, dst)`` pairs read as edge types: the served graph's types do not change."""
        self.graph_version: int | None = None
        """The graph version requests read (``None``: not chosen yet; the first request pins
        the newest)."""

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        # A lock cannot be pickled; each process counts anew.
        state.update(claimed=0, _claim_lock=None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._claim_lock = threading.Lock()

    def switch_version(self, version: int | None = None) -> int:
        """Read graph ``version`` from now on (default: the server's newest); returns it.

        Raises:
            InvalidRequestError: a negative version.
            ServerUnavailableError: the server is unreachable.
        """
        if version is None:
            version = server_info(self.connection).graph_version
        elif isinstance(version, bool) or not isinstance(version, int) or version < 0:
            raise InvalidRequestError(f"version must be an int >= 0 or None, got {version!r}")
        with self._claim_lock:
            self.graph_version = version
        return version

    def claim_seed(self) -> int:
        """The seed of the next request, taken now (call in batch order)."""
        with self._claim_lock:
            call, self.claimed = self.claimed, self.claimed + 1
        if self.seed is None:
            return int(torch.randint(1 << 62, ()))
        return seeded_call_seed(self.seed, call)

    @property
    def edge_permutation(self) -> None:
        """``None``: ``edge`` already holds the server's edge ids."""
        return None

    def sample_from_nodes(
        self, index: NodeSamplerInput, **kwargs: Any
    ) -> SamplerOutput | HeteroSamplerOutput:
        """PyG's entry point: ``sample_nodes`` with a request seed claimed now."""
        return self.sample_nodes(index, seed=self.claim_seed())

    def sample_from_edges(
        self, index: EdgeSamplerInput, neg_sampling: NegativeSampling | None = None
    ) -> SamplerOutput | HeteroSamplerOutput:
        """PyG's entry point: ``sample_edges`` with a request seed claimed now."""
        return self.sample_edges(index, neg_sampling, seed=self.claim_seed())

    def sample_nodes(
        self, index: NodeSamplerInput, *, seed: int, reads_ahead: int = 0
    ) -> SamplerOutput | HeteroSamplerOutput:
        """Sample around the seeds of ``index`` (**global** ids) in one RPC, with the request
        seed ``seed`` (from ``claim_seed``), ``reads_ahead`` batches being read before this
        one (a prefetcher's; see ``FeatureExchange.request``).

        Raises:
            InvalidRequestError: no seeds, an id out of range, bad fanouts, seed times without
                ``time_attr``.
            NotFoundError: an unknown node type.
            ServerUnavailableError: the server is unreachable or missed the deadline.
        """
        request = node_input_to_proto(index)
        self._prepare(request, seed, reads_ahead)
        return self._sample("SampleFromNodes", request)

    def sample_edges(
        self, index: EdgeSamplerInput, neg_sampling: NegativeSampling | None, *, seed: int, reads_ahead: int = 0
    ) -> SamplerOutput | HeteroSamplerOutput:
        """Sample around seed links (global endpoint ids) and their negatives in one RPC;
        ``seed`` and ``reads_ahead`` as for ``sample_nodes``.

        Label indices in the metadata are **local**; ``n_id[dst_neg_index]`` are the
        negatives' global ids.

        Raises:
            InvalidRequestError: no links, an id out of range, bad fanouts or negative sampling.
            NotFoundError: an unknown edge or node type.
            ServerUnavailableError: the server is unreachable or missed the deadline.
        """
        if isinstance(index.input_type, tuple) and len(index.input_type) == 2:
            index = dataclasses.replace(index, input_type=self._canonical(index.input_type))
        request = edge_input_to_proto(index, neg_sampling)
        self._prepare(request, seed, reads_ahead)
        return self._sample("SampleFromEdges", request)

    def _canonical(self, pair: tuple[str, str]) -> EdgeType:
        """A ``(src, dst)`` pair as PyG's ``HeteroData`` reads it: the one served edge type from
        ``src`` to ``dst``, else ``(src, 'to', dst)`` when there is none (a relation without
        edges yet, whose links a loader may still predict).

        Raises:
            InvalidRequestError: several edge types go from ``src`` to ``dst``.
        """
        if pair not in self._canonical_pairs:
            src, dst = pair
            matches = {a.edge_type for a in RemoteGraphStore(self.connection).get_all_edge_attrs()
                       if a.edge_type[0] == src and a.edge_type[-1] == dst}
            if len(matches) > 1:
                raise InvalidRequestError(
                    f"the edge type {pair!r} is ambiguous: the graph has {sorted(matches)}; name one of them"
                )
            self._canonical_pairs[pair] = matches.pop() if matches else (src, DEFAULT_REL, dst)
        return self._canonical_pairs[pair]

    def _prepare(self, request: Any, seed: int, reads_ahead: int) -> None:
        request.options.CopyFrom(options_to_proto(
            self.num_neighbors, replace=self.replace, disjoint=self.disjoint, seed=seed,
            time_attr=self.time_attr, temporal_strategy=self.temporal_strategy, weight_attr=self.weight_attr,
        ))
        request.options.graph_version = self._pinned_version()
        if self.feature_store is not None:
            request.features.CopyFrom(self.feature_store.sample_request(reads_ahead))

    def _sample(
        self, method: str, request: graph_pb2.SampleFromNodesRequest | graph_pb2.SampleFromEdgesRequest
    ) -> SamplerOutput | HeteroSamplerOutput:
        segments = self.connection.reply_segments()
        segment = None if segments is None else segments.acquire()
        request.accept_payload = True
        request.accept_data_port = self.connection.use_data_port  # also where the server refuses the segment
        if segment is not None:
            request.reply_segment.CopyFrom(segment.message)
        try:
            received = self.connection.call("GraphService", method, request, timeout=self.timeout)
        except BaseException:
            if segment is not None:
                segments.discard(segment)
            raise
        reply = received.message
        if reply.data_port_full:
            self.connection.note_data_port_full()
        shared = None if segment is None else segments.lend(segment, reply)
        if shared is None and reply.HasField("data_port_ticket"):  # the payload waits on the data port
            shared = self.connection.fetch_payload(reply.data_port_ticket, self.timeout)
            if shared is None:  # not there after all: the same seeded request again, through gRPC
                request.accept_data_port = False
                received = self.connection.call("GraphService", method, request, timeout=self.timeout)
                reply = received.message
        if shared is None:  # no segment, or the server refused it: the arrays came in the payload
            shared = received.payload
        out = output_from_proto(reply, shared)
        rows = [received_rows_from_proto(r, shared) for r in reply.features]
        if self.feature_store is not None:
            self.feature_store.deliver(out, rows)
        return out


    def _pinned_version(self) -> int:
        """The version requests read, pinned to the server's newest on first use."""
        version = self.graph_version
        if version is None:
            newest = server_info(self.connection).graph_version
            with self._claim_lock:  # concurrent first requests agree on one version
                if self.graph_version is None:
                    self.graph_version = newest
                version = self.graph_version
        return version


def _connection(client: str | Connection | RemoteFeatureStore | RemoteGraphStore) -> Connection:
    if isinstance(client, Connection):
        return client
    if isinstance(client, (RemoteFeatureStore, RemoteGraphStore)):
        return client.connection
    if isinstance(client, str):
        return Connection(client)
    raise InvalidRequestError(
        f"expected a 'host:port' address, a Connection or a remote store, got {type(client).__name__}"
    )


def _plain_num_neighbors(
    num_neighbors: Sequence[int] | Mapping[EdgeType, Sequence[int]] | NumNeighbors,
) -> list[int] | dict[EdgeType, list[int]]:
    """PyG's accepted forms as a plain list or dict of lists (what travels)."""
    if isinstance(num_neighbors, NumNeighbors):
        num_neighbors = num_neighbors.values
    if isinstance(num_neighbors, Mapping):
        return {tuple(et): [int(k) for k in hops] for et, hops in num_neighbors.items()}
    if isinstance(num_neighbors, (list, tuple)):
        return [int(k) for k in num_neighbors]
    raise InvalidRequestError(
        f"num_neighbors must be a list of ints or a dict edge type -> list, got "
        f"{type(num_neighbors).__name__}"
    )
