"""``RemoteFeatureStore``: PyG's FeatureStore over a gnnstore server, one RPC per mini-batch.

Rows are addressed by **global** node ids (dense per node type, ``0 .. N-1``): the loader asks
for ``index = n_id``. Every index form works: a 1-D int64 or int32 tensor (order and duplicates
kept, empty gives 0 rows), a numpy array, an ``int``, a ``slice`` and ``None`` (the whole
tensor, streamed in chunks).
"""
from __future__ import annotations

import logging
from typing import Any

import numpy as np
import torch
from torch import Tensor
from torch_geometric.data import FeatureStore, TensorAttr
from torch_geometric.sampler import HeteroSamplerOutput, SamplerOutput

from gnnstore.client.channel import Connection, as_connection
from gnnstore.client.feature_exchange import ExchangeCache, FeatureExchange
from gnnstore.client.received_rows import ReceivedRows
from gnnstore.common.attr_schema import AttrSchema
from gnnstore.common.errors import InvalidRequestError, NotFoundError
from gnnstore.proto import feature_pb2, graph_pb2
from gnnstore.proto.codec import (
    attr_key_to_proto,
    attr_name_to_wire,
    attr_schema_from_proto,
    ids_to_proto,
    set_group,
)
from gnnstore.proto.tensor_codec import tensor_from_proto, tensor_to_proto

logger = logging.getLogger(__name__)

SERVICE = "FeatureService"


def tensor_schema(connection: Connection) -> list[AttrSchema]:
    """Every attribute the server stores, with dtype and shape (one RPC)."""
    reply = connection.call(SERVICE, "ListTensorAttrs", feature_pb2.ListTensorAttrsRequest())
    return [attr_schema_from_proto(s) for s in reply.attrs]


class RemoteFeatureStore(FeatureStore):
    """PyG FeatureStore whose rows live on a gnnstore server; safe to pickle into workers.

    Args:
        connection: a :class:`Connection`, or a ``"host:port"`` address to open one for.
        cache: the trainer's row cache (``FeatureCache``) reads go through (``None``: none).
        wire_dtype: a 16-bit float the rows riding with samples travel as (``connect``'s
            ``wire_dtype``; ``None``: exact).
        schema: the server's attributes if already read (``tensor_schema``), so the first
            ``schema()`` makes no call.

    Its ``exchange`` (``FeatureExchange``) is the seam through which a
    :class:`RemoteNeighborSampler` hands over the rows it brought with a sample.
    """

    def __init__(
        self, connection: Connection | str, *, cache: ExchangeCache | None = None,
        wire_dtype: torch.dtype | str | None = None, schema: list[AttrSchema] | None = None,
    ) -> None:
        super().__init__()
        self.connection = as_connection(connection)
        self.exchange = FeatureExchange(self._fetch, cache, wire_dtype=wire_dtype)
        self._schema = schema

    def __repr__(self) -> str:
        return f"RemoteFeatureStore({self.connection.address!r})"

    @property
    def cache(self) -> Any:
        """The feature cache the loader's reads go through (``None`` without one).

        ``fs.cache.start_epoch()`` closes an epoch and returns its hit rate per tier.
        """
        return self.exchange.cache

    def fetch_rows(self, attrs: list[TensorAttr]) -> list[Tensor]:
        """Rows straight from the server in one MultiGet, past any cache and delivered rows
        (not counted in the exchange's ``fetched_*``)."""
        return self._fetch(attrs)

    def sample_request(self, reads_ahead: int = 0) -> graph_pb2.FeatureRequest:
        """What a sampling RPC asks for this store's loader: every node attribute's rows (and the
        edge attributes an ``EdgeFeatures`` added), less those its caches hold (``reads_ahead``:
        see ``FeatureExchange.request``)."""
        return self.exchange.request(self.exchange.wanted(self.schema()), reads_ahead)

    def deliver(self, out: SamplerOutput | HeteroSamplerOutput, rows: list[ReceivedRows]) -> None:
        """Keep the rows a sample brought until the loader asks for them (``FeatureExchange.deliver``)."""
        self.exchange.deliver(out, rows, self.schema())

    def schema(self, *, refresh: bool = False) -> list[AttrSchema]:
        """Every stored attribute with dtype and shape (one RPC, then cached in this object)."""
        if self._schema is None or refresh:
            self._schema = tensor_schema(self.connection)
        return self._schema

    def get_all_tensor_attrs(self) -> list[TensorAttr]:
        """New ``TensorAttr`` objects, one per stored node attribute; the loaders mutate them.

        Edge attributes are left out, as PyG's ``Data`` and ``HeteroData`` leave them out (PyG's
        loaders read every listed attribute at the batch's node ids); ``EdgeFeatures`` adds
        them to a batch, and ``schema()`` lists them.
        """
        return [TensorAttr(s.group_name, s.attr_name) for s in self.schema() if not s.is_edge]

    def _get_tensor(self, attr: TensorAttr) -> Tensor:
        return self._fetch([attr])[0]

    def _multi_get_tensor(self, attrs: list[TensorAttr]) -> list[Tensor]:
        return self.exchange.take(attrs)

    def _get_tensor_size(self, attr: TensorAttr) -> tuple[int, ...] | None:
        """The stored shape of ``attr`` (``None``: not stored).

        Raises:
            InvalidRequestError: ``group_name`` or ``attr_name`` was not given.
        """
        unset = [name for name in ("group_name", "attr_name") if not attr.is_set(name)]
        if unset:
            raise InvalidRequestError(
                f"get_tensor_size needs {' and '.join(unset)} (group_name=None for a homogeneous graph)"
            )
        for s in self.schema():
            if s.group_name == attr.group_name and s.attr_name == attr.attr_name:
                return s.shape
        request = feature_pb2.GetTensorSizeRequest(key=attr_key_to_proto(attr.group_name, attr.attr_name))
        reply = self.connection.call(SERVICE, "GetTensorSize", request)
        return tuple(reply.shape) if reply.found else None

    def _put_tensor(self, tensor: Any, attr: TensorAttr) -> bool:
        value = torch.as_tensor(tensor)
        request = feature_pb2.PutRequest(
            key=attr_key_to_proto(attr.group_name, attr.attr_name),
            all_rows=attr.index is None,
            value=tensor_to_proto(value),
        )
        if attr.index is not None:
            ids, scalar = self._ids(attr)
            request.index.CopyFrom(ids_to_proto(ids))
            if scalar:
                request.value.CopyFrom(tensor_to_proto(value.unsqueeze(0)))
        written = self.connection.call(SERVICE, "Put", request).written
        self._schema = None
        return written

    def _remove_tensor(self, attr: TensorAttr) -> bool:
        request = feature_pb2.RemoveRequest(key=attr_key_to_proto(attr.group_name, attr.attr_name))
        removed = self.connection.call(SERVICE, "Remove", request).removed
        self._schema = None
        return removed

    def _fetch(self, attrs: list[TensorAttr]) -> list[Tensor]:
        """Rows from the server: whole tensors streamed, every id list in one MultiGet."""
        out: list[Tensor] = [torch.empty(0)] * len(attrs)
        request = feature_pb2.MultiGetRequest()
        queries: dict[tuple[Any, int], tuple[feature_pb2.RowQuery, list[tuple[int, bool]]]] = {}
        for i, attr in enumerate(attrs):
            if attr.index is None:
                out[i] = self._stream_whole(attr)
                continue
            ids, scalar = self._ids(attr)
            key = (attr.group_name, id(attr.index))  # attrs sharing one index share one query
            if key not in queries:
                query = request.queries.add(index=ids_to_proto(ids))
                set_group(query, attr.group_name)
                queries[key] = (query, [])
            query, members = queries[key]
            query.attr_names.append(attr_name_to_wire(attr.attr_name))
            members.append((i, scalar))
        if queries:
            tensors = iter(self.connection.call(SERVICE, "MultiGet", request).tensors)
            for _, members in queries.values():  # replies follow the queries' order
                for i, scalar in members:
                    tensor = tensor_from_proto(next(tensors))
                    out[i] = tensor[0] if scalar else tensor
        return out

    def _stream_whole(self, attr: TensorAttr) -> Tensor:
        request = feature_pb2.GetTensorRequest(key=attr_key_to_proto(attr.group_name, attr.attr_name))
        chunks = [tensor_from_proto(c) for c in self.connection.stream_all(SERVICE, "GetTensor", request)]
        return torch.cat(chunks) if len(chunks) > 1 else chunks[0]

    def _ids(self, attr: TensorAttr) -> tuple[Tensor, bool]:
        """Global ids of ``attr.index`` as 1-D int64, and whether it was a single ``int``.

        Raises:
            InvalidRequestError: an index that is not ids, a slice or an int.
            NotFoundError: a slice over an attribute the server does not hold.
        """
        index = attr.index
        if isinstance(index, slice):
            size = self._get_tensor_size(attr)
            if size is None:
                raise NotFoundError(f"node type {attr.group_name!r} has no feature {attr.attr_name!r}")
            return torch.arange(size[0])[index], False
        if isinstance(index, (int, np.integer)) and not isinstance(index, bool):
            return torch.tensor([int(index)]), True
        if isinstance(index, Tensor) and index.dim() == 1 and (
            index.numel() == 0 or not (index.is_floating_point() or index.dtype == torch.bool)
        ):
            return index.long(), False
        raise InvalidRequestError(
            f"feature {attr.group_name!r}.{attr.attr_name!r}: index must be None, a slice, an int "
            f"or a 1-D integer tensor of global ids, got {getattr(index, 'dtype', type(index).__name__)}"
        )
