"""``RemoteIdMap``: the server's key <-> global id map, per node type, in batches."""
from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor
from torch_geometric.typing import NodeType

from gnnstore.client.channel import Connection, as_connection
from gnnstore.proto import idmap_pb2
from gnnstore.proto.codec import ids_to_proto, node_type_to_proto
from gnnstore.proto.key_codec import NodeKey, keys_from_proto, keys_to_proto
from gnnstore.proto.tensor_codec import ids_from_proto


class RemoteIdMap:
    """Translate the user's node keys (int or str) to gnnstore's dense global ids and back.

    Args:
        connection: a :class:`Connection`, or a ``"host:port"`` address to open one for.
    """

    def __init__(self, connection: Connection | str) -> None:
        self.connection = as_connection(connection)

    def to_ids(self, node_type: NodeType | None, keys: Sequence[NodeKey] | Tensor) -> Tensor:
        """Global ids (int64) of known keys, in key order.

        Raises:
            NotFoundError: an unknown node type or key.
        """
        request = idmap_pb2.ToIdsRequest(node_type=node_type_to_proto(node_type), keys=keys_to_proto(keys))
        return ids_from_proto(self.connection.call("IdMapService", "ToIds", request).ids)

    def to_keys(self, node_type: NodeType | None, ids: Sequence[int] | Tensor) -> list[NodeKey]:
        """Keys of global ids, in id order.

        Raises:
            NotFoundError: an unknown node type.
            InvalidRequestError: an id out of range.
        """
        request = idmap_pb2.ToKeysRequest(node_type=node_type_to_proto(node_type), ids=ids_to_proto(ids))
        keys = keys_from_proto(self.connection.call("IdMapService", "ToKeys", request).keys)
        return keys if isinstance(keys, list) else keys.tolist()
