"""``connect``: the PyG store pair for a running gnnstore server, optionally with a feature cache."""
from __future__ import annotations

import os
from collections.abc import Sequence

import torch

from gnnstore.client.channel import DEFAULT_TIMEOUT_S, Connection
from gnnstore.client.feature_cache import FeatureCache
from gnnstore.client.hot_set import ranks_nodes, warm_hot_set
from gnnstore.client.remote_feature_store import RemoteFeatureStore, tensor_schema
from gnnstore.client.remote_graph_store import RemoteGraphStore
from gnnstore.client.retry import DEFAULT_RETRY_TIMEOUT_S
from gnnstore.proto.limits import DEFAULT_MAX_MESSAGE_BYTES


def connect(
    address: str | Sequence[str],
    *,
    timeout: float = DEFAULT_TIMEOUT_S,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    cache_bytes: int = 0,
    cache_policy: str | None = None,
    cache_device: str | torch.device = "cpu",
    shared_memory: bool | None = None,
    token: str | None = None,
    tls: bool | str | os.PathLike | None = None,
    client_cert: str | os.PathLike | None = None,
    client_key: str | os.PathLike | None = None,
    retry_timeout: float = DEFAULT_RETRY_TIMEOUT_S,
    use_data_port: bool = True,
    wire_dtype: torch.dtype | str | None = None,
) -> tuple[RemoteFeatureStore, RemoteGraphStore]:
    """``(feature_store, graph_store)`` for the server at ``address``, sharing one connection.

    Several servers of one graph (replicas, or ``--read-only`` servers over one data directory)
    are one connection too: calls go round robin over them, and a call that finds its server
    down is sent to another (see ``retry_timeout``). Listed servers are asked now which graph
    they serve.

    Without a cache nothing is sent yet: the channel opens on the first call, in whichever
    process makes it. With ``cache_bytes`` > 0 the feature store gets a :class:`FeatureCache`
    (``fs.cache``) whose static tier is filled now with the server's nodes of highest
    out-degree (one HotNodes call and batched MultiGets per node type); each sampling request
    then brings back only the rows the cache lacks. Pass the pair as PyG's ``data`` and
    ``feature_store=fs`` to ``RemoteNeighborSampler``.

    Args:
        address: ``"host:port"`` of a running ``gnnstore serve``; or a list of them, or a gRPC
            target naming several (``"dns:///name:port"``, ``"ipv4:a:p,b:p"``). Large replies
            come through the data port only where the servers share one host.
        timeout: deadline in seconds of every call (default 30).
        max_message_bytes: message limit, mirroring the server's (default 256 MiB).
        cache_bytes: bytes of feature rows to keep on the trainer (0: no cache), shared by
            every node attribute in proportion to its size.
        cache_policy: ``static``, ``lru``, ``sieve``, ``static+lru`` or ``static+sieve`` (half
            the budget a hot set, half a dynamic tier). ``None`` (default): ``static`` where the
            server ranks its nodes, else ``sieve`` (a server sampling live from Neo4j has no
            ranking). A dynamic tier copies every miss into the cache and halves the hot set;
            on power-law graphs behind a ``Prefetcher`` it costs the trainer more CPU than it
            saves bytes (the docs' Caching page has the figures).
        cache_device: where cached rows live; a CUDA device keeps them on the GPU.
        shared_memory: receive sampling replies through shared memory; ``None`` (default) tries
            when ``address`` is a loopback one and falls back to the socket if the server
            cannot reach this process's memory (another container, another user).
        token: the bearer token of a server with tokens (default ``$GNNSTORE_TOKEN``); loader
            workers inherit it under fork and spawn.
        tls: ``True`` for TLS trusting the system's CAs, or the path of the PEM CA that signed
            the server's certificate; ``None`` (default) is ``$GNNSTORE_TLS_CA`` if set, else
            plaintext.
        client_cert: PEM certificate of this client, for mutual TLS.
        client_key: PEM key of that certificate.
        retry_timeout: seconds a sampling, read or Put call keeps retrying while the server,
            once reached, is unreachable (a restart); default 60, 0 never retries. A server that
            comes back serving another graph version raises ``PreconditionError``.
        use_data_port: read large sampling replies without shared memory from the server's data
            port (a socket beside the gRPC port, TLS when this connection has it) instead of
            through gRPC (default ``True``); if the port cannot be reached, a warning says so once
            and the replies come through gRPC.
        wire_dtype: ``"bfloat16"`` or ``"float16"`` (or the torch dtype) to have the rows of
            float32 and float64 attributes that ride with samples travel rounded to it: half
            their bytes, for a slow link. **Lossy**: a batch's (and the cache's) rows are then
            the rounded values. ``None`` (default): rows are exact.

    Raises:
        PreconditionError: listed servers serve different graphs (the message names them).
        InvalidRequestError: an empty list, an address that is not ``host:port``, a timeout
            <= 0, a negative retry_timeout, a bad cache size or policy, a wire dtype other than a
            16-bit float, or a certificate file that cannot be read.
        ServerUnavailableError: a cache was asked for and the server cannot be reached, or none
            of the listed servers answers (also when TLS fails: the message says so).
        AuthenticationError, PermissionDeniedError: a cache was asked for and the token is
            missing, unknown, or its role may not read.
    """
    connection = Connection(
        address, timeout=timeout, max_message_bytes=max_message_bytes, shared_memory=shared_memory,
        token=token, tls=tls, client_cert=client_cert, client_key=client_key, retry_timeout=retry_timeout,
        use_data_port=use_data_port,
    )
    if len(connection.target.servers) > 1:
        connection.check_servers_agree()
    cache = schema = None
    if cache_bytes:
        schema = tensor_schema(connection)
        node_attrs = [s for s in schema if not s.is_edge]  # EdgeFeatures caches edge rows
        if cache_policy is None:
            cache_policy = "static" if not node_attrs or ranks_nodes(connection, node_attrs[0].group_name) else "sieve"
        cache = FeatureCache(cache_bytes, node_attrs, policy=cache_policy, device=cache_device)
    fs = RemoteFeatureStore(connection, cache=cache, wire_dtype=wire_dtype, schema=schema)
    if cache is not None:
        warm_hot_set(fs)
    return fs, RemoteGraphStore(connection)
