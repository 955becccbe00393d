"""FeatureService: rows by global id over the server's FeatureStore. The store works; this translates."""
from __future__ import annotations

import logging
from collections.abc import Iterator

import grpc
import torch
from torch_geometric.data import FeatureStore, TensorAttr

from gnnstore.backend.service.error_translation import translate_errors
from gnnstore.common.errors import InvalidRequestError, NotFoundError, ResourceExhaustedError
from gnnstore.common.graph_types import describe
from gnnstore.proto import feature_pb2, feature_pb2_grpc
from gnnstore.proto.codec import (
    attr_key_from_proto,
    attr_name_from_wire,
    attr_schema_to_proto,
    group_from_proto,
    ids_from_proto,
    tensor_from_proto,
    tensor_to_proto,
)
from gnnstore.proto.common_pb2 import Tensor, TensorSchema
from gnnstore.proto.limits import DEFAULT_CHUNK_BYTES

logger = logging.getLogger(__name__)


class FeatureServicer(feature_pb2_grpc.FeatureServiceServicer):
    """FeatureService over one FeatureStore that also answers ``tensor_schema()``.

    Args:
        store: the feature store (or a read tier with the same interface).
        max_message_bytes: the server's message limit; a reply that would pass it is refused
            with a message saying to ask for fewer ids.
        max_put_rows: the most rows one Put may write.
    """

    def __init__(self, store: FeatureStore, max_message_bytes: int, max_put_rows: int = 1 << 24) -> None:
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
            try:
                size = self._store.get_tensor_size(group_name=group, attr_name=name)
            except KeyError:
                size = None
            if size is None:
                return feature_pb2.GetTensorSizeResponse(found=False)
            return feature_pb2.GetTensorSizeResponse(found=True, shape=list(size))

    def MultiGet(
        self, request: feature_pb2.MultiGetRequest, context: grpc.ServicerContext
    ) -> feature_pb2.MultiGetResponse:
        """Rows of several attributes per id list, all in one store call and one reply; its size
        is checked from the schema before any row is read."""
        with translate_errors(context, "FeatureService.MultiGet"):
            row_bytes = {(s.group_name, s.attr_name): s.row_bytes for s in self._store.tensor_schema()}
            attrs, nbytes = [], 0
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
                nbytes += rows * sum(row_bytes.get((group, name), 0) for name in names)
                self._check_reply_size(nbytes, "MultiGet")
                index = ids_from_proto(query.index, f"index of {where}")
                attrs += [TensorAttr(group, name, index) for name in names]
            tensors = self._store.multi_get_tensor(attrs) if attrs else []
            return feature_pb2.MultiGetResponse(tensors=[tensor_to_proto(t) for t in tensors])

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
                index = torch.arange(start, min(start + rows, shape[0]))
                chunk = self._store.get_tensor(group_name=group, attr_name=name, index=index)
                yield tensor_to_proto(chunk)

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
            value = tensor_from_proto(request.value, f"value of {describe(group)}.{name}")
            index = None if request.all_rows else ids_from_proto(request.index, "Put index")
            written = self._store.put_tensor(value, group_name=group, attr_name=name, index=index)
            logger.info("[FeatureService.Put] %s.%s: %s", describe(group), name, list(value.shape))
            return feature_pb2.PutResponse(written=bool(written))

    def Remove(
        self, request: feature_pb2.RemoveRequest, context: grpc.ServicerContext
    ) -> feature_pb2.RemoveResponse:
        """Delete one attribute."""
        with translate_errors(context, "FeatureService.Remove"):
            group, name = attr_key_from_proto(request.key)
            removed = self._store.remove_tensor(group_name=group, attr_name=name, index=None)
            logger.info("[FeatureService.Remove] %s.%s: removed=%s", describe(group), name, removed)
            return feature_pb2.RemoveResponse(removed=bool(removed))

    def _check_reply_size(self, nbytes: int, what: str) -> None:
        if nbytes > self._max_message_bytes:
            raise ResourceExhaustedError(
                f"{what} reply would be {nbytes} bytes, over the server's message limit of "
                f"{self._max_message_bytes}; ask for fewer ids per call"
            )


def schema_to_proto(store: FeatureStore) -> list[TensorSchema]:
    """The store's ``tensor_schema()`` on the wire."""
    return [attr_schema_to_proto(s) for s in store.tensor_schema()]
