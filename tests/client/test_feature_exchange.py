"""The sampler-to-feature-store seam: delivered rows, a plugged-in cache, and only misses travelling."""
from __future__ import annotations

import pickle
from types import SimpleNamespace

import numpy as np
import torch
from served import ServerProcess
from torch import Tensor
from torch_geometric.data import Data, TensorAttr
from torch_geometric.loader import NodeLoader
from torch_geometric.sampler import SamplerOutput

from gnnstore.client import FeatureExchange, RemoteFeatureStore, RemoteNeighborSampler, connect
from gnnstore.client.feature_cache import FeatureCache
from gnnstore.client.received_rows import ReceivedRows


class WarmRows:
    """A cache already holding every row of ids ``0 .. known-1``; says so through ``known_ids``."""

    device = torch.device("cpu")

    def __init__(self, graph: Data, known: int) -> None:
        self.rows = {"x": graph.x, "y": graph.y, "train_mask": graph.train_mask,
                     "val_mask": graph.val_mask, "test_mask": graph.test_mask}
        self.known = known
        self.fetched: list[Tensor] = []

    def known_ids(self, group_name: object, **tiers: bool) -> Tensor:
        return torch.arange(self.known)

    def hot_prefix(self, group_name: object) -> None:
        return None  # warmed from no ranking

    def locate(self, group_name: object, attr_names: list[str], ids: Tensor, *,
               into: list[Tensor] | None = None, written: np.ndarray | None = None,
               sent: object = None) -> SimpleNamespace:  # sent rows are only offered: the misses are named
        out = list(into) if into is not None else [self.rows[name][ids].clone() for name in attr_names]
        held = ids < self.known
        for o, name in zip(out, attr_names):
            o[held] = self.rows[name][ids[held]]
        lacking = ~held if written is None else ~held & ~torch.from_numpy(written)
        missing = torch.unique(ids[lacking])
        if missing.numel():
            self.fetched.append(missing)
        return SimpleNamespace(wanted=missing, rows=out, at=torch.searchsorted(missing, ids[lacking]), lacking=lacking)

    def fill(self, read: SimpleNamespace, rows: list[Tensor]) -> list[Tensor]:
        for o, r in zip(read.rows, rows):
            o[read.lacking] = r[read.at]
        return read.rows


def _loader(fs: RemoteFeatureStore, gs: object, seeds: Tensor) -> NodeLoader:
    sampler = RemoteNeighborSampler(fs, [5, 3], feature_store=fs)
    return NodeLoader((fs, gs), node_sampler=sampler, input_nodes=seeds, batch_size=40, shuffle=True)


def test_a_real_feature_cache_in_the_seam_keeps_batches_exact(homo_server: ServerProcess, homo_graph: Data) -> None:
    fs, gs = connect(homo_server.address)
    cache = FeatureCache(1 << 20, fs.schema(), policy="lru")
    fs.exchange.cache = cache
    loader = _loader(fs, gs, torch.arange(120))
    for _ in range(2):
        cache.start_epoch()
        for batch in loader:
            assert torch.equal(batch.x, homo_graph.x[batch.n_id])
            assert torch.equal(batch.y, homo_graph.y[batch.n_id])
    assert cache.stats().hits > 0  # the second epoch reads rows it kept from the first


def test_only_missing_rows_travel_when_the_cache_names_its_ids(homo_server: ServerProcess, homo_graph: Data) -> None:
    fs, gs = connect(homo_server.address)
    cache = WarmRows(homo_graph, known=200)
    fs.exchange.cache = cache
    delivered: list[Tensor] = []
    deliver = fs.exchange.deliver
    fs.exchange.deliver = lambda out, rows, *schema: (delivered.extend(r.ids for r in rows), deliver(out, rows, *schema))[1]
    for batch in _loader(fs, gs, torch.arange(0, 400, 5)):
        assert torch.equal(batch.x, homo_graph.x[batch.n_id])
    sent = torch.cat(delivered)
    assert sent.numel() > 0 and int(sent.min()) >= 200  # no row the cache holds was sent
    assert not cache.fetched  # aligned rows in the reply segment: every miss was written in place


def test_an_unmatched_request_falls_back_to_one_multiget(homo_server: ServerProcess, homo_graph: Data) -> None:
    fs, _ = connect(homo_server.address)
    index = torch.tensor([9, 1, 9])
    x, y = fs.multi_get_tensor([(None, "x", index), (None, "y", index)])  # no sample was delivered
    assert torch.equal(x, homo_graph.x[index]) and torch.equal(y, homo_graph.y[index])


class TenTimesId:
    """A fetch whose row of id ``i`` is ``[10 * i]``; it records the ids it is asked for."""

    def __init__(self) -> None:
        self.asked: list[list[int]] = []

    def __call__(self, attrs: list[TensorAttr]) -> list[Tensor]:
        self.asked.extend(a.index.tolist() for a in attrs)
        return [a.index.float().view(-1, 1) * 10 for a in attrs]


def test_delivered_rows_answer_once_and_never_cross_a_pickle() -> None:
    fetch = TenTimesId()
    exchange = FeatureExchange(fetch)
    n_id = torch.tensor([4, 2, 4])
    rows = torch.tensor([[21.0], [41.0]])  # rows of ids 2 and 4, not in n_id order: looked up
    exchange.deliver(SamplerOutput(node=n_id, row=n_id[:0], col=n_id[:0], edge=None),
                     [ReceivedRows(None, torch.tensor([2, 4]), {"x": rows})])
    clone = pickle.loads(pickle.dumps(exchange))

    (x,) = exchange.take([TensorAttr(None, "x", n_id)])
    assert torch.equal(x, torch.tensor([[41.0], [21.0], [41.0]])) and not fetch.asked
    (x,) = exchange.take([TensorAttr(None, "x", n_id)])  # taken once: now a fetch
    assert torch.equal(x, torch.tensor([[40.0], [20.0], [40.0]])) and fetch.asked == [[4, 2, 4]]
    assert exchange.fetched_rows == 3
    (x,) = clone.take([TensorAttr(None, "x", n_id)])  # the pickle carried no pending rows, and its own fetch
    assert torch.equal(x, torch.tensor([[40.0], [20.0], [40.0]])) and clone.fetched_rows == 3


def test_rows_the_server_left_out_are_fetched_alone() -> None:
    fetch = TenTimesId()
    exchange = FeatureExchange(fetch)
    n_id = torch.tensor([4, 2, 7])
    exchange.deliver(SamplerOutput(node=n_id, row=n_id[:0], col=n_id[:0], edge=None),
                     [ReceivedRows(None, torch.tensor([2, 4]), {"x": torch.tensor([[20.0], [40.0]])})])
    (x,) = exchange.take([TensorAttr(None, "x", n_id)])
    assert torch.equal(x, torch.tensor([[40.0], [20.0], [70.0]]))
    assert fetch.asked == [[7]]  # only the row that was not delivered


def test_aligned_rows_with_other_ids_than_the_batch_are_not_trusted() -> None:
    exchange = FeatureExchange(TenTimesId())
    n_id = torch.tensor([4, 2, 7])
    rows = torch.tensor([[40.0], [99.0], [55.0]])  # aligned: rows at positions 0 and 2 written
    claimed = ReceivedRows(None, torch.tensor([4, 9]), {"x": rows}, positions=torch.tensor([0, 2]))  # 9 is not n_id[2]
    exchange.deliver(SamplerOutput(node=n_id, row=n_id[:0], col=n_id[:0], edge=None), [claimed])
    (x,) = exchange.take([TensorAttr(None, "x", n_id)])
    assert torch.equal(x, torch.tensor([[40.0], [20.0], [70.0]]))


def test_rows_are_asked_for_aligned_only_where_a_cpu_cache_fills_around_them() -> None:
    spec = SimpleNamespace(group_name=None, attr_name="x", dtype="float32", shape=(100, 4))
    attrs = [(None, "x")]
    fetch = TenTimesId()
    assert not FeatureExchange(fetch).request(attrs).aligned  # no cache: rows one per id
    assert FeatureExchange(fetch, FeatureCache(800, [spec], policy="lru")).request(attrs).aligned
    off_cpu = FeatureCache(800, [spec], policy="lru", device="meta")  # rows off the CPU: gathered apart
    assert not FeatureExchange(fetch, off_cpu).request(attrs).aligned
