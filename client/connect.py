"""``connect``: the PyG store pair for a running gnnstore server."""
from __future__ import annotations

from gnnstore.client.channel import DEFAULT_TIMEOUT_S, Connection
from gnnstore.client.remote_feature_store import RemoteFeatureStore
from gnnstore.client.remote_graph_store import RemoteGraphStore
from gnnstore.proto.limits import DEFAULT_MAX_MESSAGE_BYTES


def connect(
    address: str,
    *,
    timeout: float = DEFAULT_TIMEOUT_S,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
) -> tuple[RemoteFeatureStore, RemoteGraphStore]:
    """``(feature_store, graph_store)`` for the server at ``address``, sharing one connection.

    Nothing is sent yet: the channel opens on the first call, in whichever process makes it.
    Pass the pair as PyG's ``data`` and ``feature_store=fs`` to ``RemoteNeighborSampler``.

    Args:
        address: ``"host:port"`` of a running ``gnnstore serve``.
        timeout: deadline in seconds of every call (default 30).
        max_message_bytes: message limit, mirroring the server's (default 256 MiB).

    Raises:
        InvalidRequestError: an address that is not ``host:port``, or a timeout <= 0.
    """
    connection = Connection(address, timeout=timeout, max_message_bytes=max_message_bytes)
    return RemoteFeatureStore(connection), RemoteGraphStore(connection)
