"""FeatureService: rows by global id over the server's FeatureStore. The store works; this translates."""
from __future__ import annotations

import logging
from collections.abc import Iterator

import grpc

from gnnstore.backend.features.tiered_feature_store import RowQuery, TieredFeatureStore
from gnnstore.backend.service.error_translation import translate_errors
from gnnstore.common.errors import InvalidRequestError, NotFoundError, ResourceExhaustedError
from gnnstore.common.graph_types import describe
from gnnstore.proto import feature_pb2, feature_pb2_grpc
from gnnstore.proto.codec import (
    array_from_proto,
    array_to_proto,
    attr_key_from_proto,
    attr_name_from_wire,
    attr_schema_to_proto,
    group_from_proto,
    id_array_from_proto,
)
from gnnstore.proto.common_pb2 import Tensor, TensorSchema
from gnnstore.proto.limits import DEFAULT_CHUNK_BYTES

logger = logging.getLogger(__name__)


class FeatureServicer(feature_pb2_grpc.FeatureServiceServicer):
    """FeatureService over the server's feature store.

    Args:
        store: the read tier over the RocksDB store.
        max_message_bytes: the server's message limit; a reply that would pass it is refused
            with a message saying to ask for fewer ids.
        max_put_rows: the most rows one Put may write.
    """

    def __init__(self, store: TieredFeatureStore, max_message_bytes: int, max_put_rows: int = 1 << 24) -> None:
        self._store = store
        self._max_message_bytes = max_message_bytes
        self._max_put_rows = max_put_rows

    def ListTensorAttrs(
        self, request: feature_pb2.ListTensorAttrsRequest, context: grpc.ServicerContext
    ) -> feature_pb2.ListTensorAttrsResponse:
        """Every stored (node type, attr) with dtype and full shape."""
        with translate_errors(context, "FeatureService.ListTensorAttrs"):
            return feature_pb2.ListTensorAttrsResponse(attrs=schema_to_proto(self._store))

    def GetTensorSize(
        self, request: feature_pb2.GetTensorSizeRequest, context: grpc.ServicerContext
    ) -> feature_pb2.GetTensorSizeResponse:
        """The full shape of one attribute, or ``found=False``."""
        with translate_errors(context, "FeatureService.GetTensorSize"):
            group, name = attr_key_from_proto(request.key)
            size = self._store.size(group, name)
            if size is None:
                return feature_pb2.GetTensorSizeResponse(found=False)
            return feature_pb2.GetTensorSizeResponse(found=True, shape=list(size))

    def MultiGet(
        self, request: feature_pb2.MultiGetRequest, context: grpc.ServicerContext
    ) -> feature_pb2.MultiGetResponse:
        """Rows of several attributes per id list, all in one store call and one reply; its size
        is checked from the schema before any row is read."""
        with translate_errors(context, "FeatureService.MultiGet"):
            schema = {(s.group_name, s.attr_name): s for s in self._store.tensor_schema()}
            queries, nbytes = [], 0
            for i, query in enumerate(request.queries):
                group = group_from_proto(query)
                where = f"query {i} ({describe(group)})"
                if not query.attr_names:
                    raise InvalidRequestError(f"{where} names no attribute")
                if len(set(query.attr_names)) < len(query.attr_names):
                    twice = next(n for n in query.attr_names if list(query.attr_names).count(n) > 1)
                    raise InvalidRequestError(f"{where} names attribute {twice!r} more than once")
                rows = max(0, query.index.shape[0]) if query.index.shape else 1  # checked when decoded
                names = [attr_name_from_wire(name) for name in query.attr_names]
                nbytes += rows * sum(schema[(group, name)].row_bytes for name in names if (group, name) in schema)
                self._check_reply_size(nbytes, "MultiGet")
                index = id_array_from_proto(query.index, f"index of {where}")
                queries += [RowQuery(group, name, index) for name in names]
            arrays = self._store.read(queries) if queries else []
            return feature_pb2.MultiGetResponse(
                tensors=[array_to_proto(a, dtype=schema[(q.group_name, q.attr_name)].dtype) for q, a in zip(queries, arrays)]
            )

    def GetTensor(
        self, request: feature_pb2.GetTensorRequest, context: grpc.ServicerContext
    ) -> Iterator[Tensor]:
        """Every row of one attribute, in chunks of whole rows of about ``chunk_bytes``."""
        with translate_errors(context, "FeatureService.GetTensor"):
            group, name = attr_key_from_proto(request.key)
            schema = next(
                (s for s in self._store.tensor_schema() if s.group_name == group and s.attr_name == name), None
            )
            if schema is None:
                raise NotFoundError(f"{describe(group)} has no feature {name!r}")
            shape, row_bytes = schema.shape, max(1, schema.row_bytes)
            if request.chunk_bytes < 0:
                raise InvalidRequestError(f"chunk_bytes must be >= 0 (0: the default), got {request.chunk_bytes}")
            chunk_bytes = request.chunk_bytes or DEFAULT_CHUNK_BYTES
            rows = max(1, chunk_bytes // row_bytes)
            self._check_reply_size(rows * row_bytes, "GetTensor chunk")
            for start in range(0, max(shape[0], 1), rows):
                [chunk] = self._store.read([RowQuery(group, name, slice(start, min(start + rows, shape[0])))])
                yield array_to_proto(chunk, dtype=schema.dtype)

    def Put(
        self, request: feature_pb2.PutRequest, context: grpc.ServicerContext
    ) -> feature_pb2.PutResponse:
        """Write rows of one attribute (all of them, or at the given global ids)."""
        with translate_errors(context, "FeatureService.Put"):
            group, name = attr_key_from_proto(request.key)
            shape = list(request.value.shape)
            rows = shape[0] if shape else 1
            if rows > self._max_put_rows:
                raise ResourceExhaustedError(
                    f"a Put of {rows:,} rows to {describe(group)}.{name} is over the server's limit of "
                    f"{self._max_put_rows:,} rows a Put; split it, or raise the limit with "
                    "`gnnstore serve --max-put-rows` (GNNSTORE_MAX_PUT_ROWS)"
                )
            value = array_from_proto(request.value, f"value of {describe(group)}.{name}", words=True)
            index = None if request.all_rows else id_array_from_proto(request.index, "Put index")
            written = self._store.write(group, name, value, request.value.dtype, index)
            logger.info("[FeatureService.Put] %s.%s: %s", describe(group), name, list(value.shape))
            return feature_pb2.PutResponse(written=bool(written))

    def Remove(
        self, request: feature_pb2.RemoveRequest, context: grpc.ServicerContext
    ) -> feature_pb2.RemoveResponse:
        """Delete one attribute."""
        with translate_errors(context, "FeatureService.Remove"):
            group, name = attr_key_from_proto(request.key)
            removed = self._store.remove(group, name)
            logger.info("[FeatureService.Remove] %s.%s: removed=%s", describe(group), name, removed)
            return feature_pb2.RemoveResponse(removed=bool(removed))

    def _check_reply_size(self, nbytes: int, what: str) -> None:
        if nbytes > self._max_message_bytes:
            raise ResourceExhaustedError(
                f"{what} reply would be {nbytes} bytes, over the server's message limit of "
                f"{self._max_message_bytes}; ask for fewer ids per call"
            )


def schema_to_proto(store: TieredFeatureStore) -> list[TensorSchema]:
    """The store's ``tensor_schema()`` on the wire."""
    return [attr_schema_to_proto(s) for s in store.tensor_schema()]
