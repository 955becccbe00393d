"""IdMapService: the user's node keys <-> dense global ids, per node type, in batches."""
from __future__ import annotations

import grpc

from gnnstore.backend.service.error_translation import translate_errors
from gnnstore.proto import idmap_pb2, idmap_pb2_grpc
from gnnstore.proto.codec import id_array_from_proto, ids_to_proto, node_type_from_proto
from gnnstore.proto.key_codec import keys_from_proto, keys_to_proto
from gnnstore.stores.id_map import IdMap


class IdMapServicer(idmap_pb2_grpc.IdMapServiceServicer):
    """IdMapService over the persistent id map; unknown keys are NOT_FOUND, never assigned."""

    def __init__(self, id_map: IdMap) -> None:
        self._id_map = id_map

    def ToIds(
        self, request: idmap_pb2.ToIdsRequest, context: grpc.ServicerContext
    ) -> idmap_pb2.ToIdsResponse:
        """Global ids of known keys, in key order."""
        with translate_errors(context, "IdMapService.ToIds"):
            node_type = node_type_from_proto(request.node_type)
            ids = self._id_map.to_ids(node_type, keys_from_proto(request.keys))
            return idmap_pb2.ToIdsResponse(ids=ids_to_proto(ids))

    def ToKeys(
        self, request: idmap_pb2.ToKeysRequest, context: grpc.ServicerContext
    ) -> idmap_pb2.ToKeysResponse:
        """Keys of global ids, in id order."""
        with translate_errors(context, "IdMapService.ToKeys"):
            node_type = node_type_from_proto(request.node_type)
            keys = self._id_map.to_keys(node_type, id_array_from_proto(request.ids, "ids"))
            return idmap_pb2.ToKeysResponse(keys=keys_to_proto(keys))
