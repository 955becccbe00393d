"""Sampling replies through shared memory on the server's host: exact, growing, and falling back."""
from __future__ import annotations

import gc

import pytest
import torch
from served import ServerProcess
from torch_geometric.data import Data
from torch_geometric.loader import NodeLoader
from torch_geometric.sampler import NodeSamplerInput

from gnnstore.client import RemoteNeighborSampler, connect, segment_pool, server_stats
from gnnstore.client.sampler_wire import node_input_to_proto
from gnnstore.client.segment_pool import ReplySegmentPool
from gnnstore.common.errors import InvalidRequestError
from gnnstore.proto import graph_pb2
from gnnstore.proto.sampling_options import options_to_proto

SAMPLE = "/gnnstore.v1.GraphService/SampleFromNodes"


def batches(address: str, *, shared_memory: bool | None) -> tuple[list[Data], ReplySegmentPool | None]:
    fs, gs = connect(address, shared_memory=shared_memory)
    sampler = RemoteNeighborSampler(fs, [5, 3], feature_store=fs, seed=3)
    loader = NodeLoader((fs, gs), node_sampler=sampler, input_nodes=torch.arange(200), batch_size=40)
    return list(loader), fs.connection.reply_segments()


def reply_bytes(address: str) -> tuple[int, int]:
    """Sampling reply bytes so far: (through the socket, through reply segments)."""
    stats = server_stats(address).get(SAMPLE)
    return (0, 0) if stats is None else (stats.bytes_sent, stats.bytes_shared)


def test_replies_come_through_shared_memory_and_equal_the_socket_ones(
    homo_server: ServerProcess, homo_graph: Data
) -> None:
    socket_0, shared_0 = reply_bytes(homo_server.address)
    shared, pool = batches(homo_server.address, shared_memory=None)  # loopback: on by default
    socket_1, shared_1 = reply_bytes(homo_server.address)
    inline, no_pool = batches(homo_server.address, shared_memory=False)
    socket_2, shared_2 = reply_bytes(homo_server.address)
    assert no_pool is None and pool is not None and pool.refused is None
    assert socket_2 - socket_1 > 5 * (socket_1 - socket_0)  # only small fields left the socket
    assert shared_1 - shared_0 == pool.placed_bytes > 0.8 * (socket_2 - socket_1)
    assert shared_2 == shared_1
    # Each kept batch is decoded in place and holds its segment: none was reused under it.
    assert pool.lent == len(shared) and pool.idle == 0
    for a, b in zip(shared, inline, strict=True):
        for key in ("n_id", "edge_index", "e_id", "x", "y", "train_mask"):
            assert torch.equal(a[key], b[key]), key
        assert torch.equal(a.x, homo_graph.x[a.n_id])
    del shared, a
    gc.collect()
    assert pool.lent == 0 and pool.idle == 5  # back once the batches are gone


def test_past_the_lending_limit_replies_are_copied_out_and_segments_come_back_at_once(
    homo_server: ServerProcess, homo_graph: Data, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(segment_pool, "MAX_LENT", 2)
    kept, pool = batches(homo_server.address, shared_memory=True)
    assert pool.lent == 2 and pool.idle == 1  # two held by batches, one used over and over
    for batch in kept:
        assert torch.equal(batch.x, homo_graph.x[batch.n_id])
        assert torch.equal(batch.y, homo_graph.y[batch.n_id])


def test_a_segment_too_small_grows_after_one_partly_inline_reply(
    homo_server: ServerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(segment_pool, "INITIAL_SEGMENT_BYTES", 512)
    got, pool = batches(homo_server.address, shared_memory=True)
    assert pool.segment_bytes > 512 and pool.refused is None
    for batch in got:
        assert batch.x.shape[0] == batch.n_id.numel()
    del got, batch
    gc.collect()
    assert pool.lent == 0 and 0 < pool.idle < 5  # the small segment was closed, grown ones kept


def test_a_failed_call_never_reuses_its_segment(homo_server: ServerProcess) -> None:
    fs, _ = connect(homo_server.address, shared_memory=True)
    sampler = RemoteNeighborSampler(fs, [5, 3], feature_store=fs)
    with pytest.raises(InvalidRequestError, match="out of range"):
        sampler.sample_from_nodes(NodeSamplerInput(input_id=torch.tensor([0]), node=torch.tensor([10_000])))
    pool = fs.connection.reply_segments()
    assert pool.idle == 0 and pool.lent == 0  # the server may still write into it
    sampler.sample_from_nodes(NodeSamplerInput(input_id=torch.tensor([0]), node=torch.tensor([1])))
    assert pool.lent == 1  # a new segment, held by the rows waiting for the loader


def test_a_segment_the_server_cannot_open_is_refused_and_the_reply_travels_inline(
    homo_server: ServerProcess,
) -> None:
    fs, _ = connect(homo_server.address, shared_memory=False)
    request = node_input_to_proto(NodeSamplerInput(input_id=torch.tensor([0, 1]), node=torch.tensor([4, 2])))
    request.options.CopyFrom(options_to_proto([3], replace=False, disjoint=False, seed=1))
    no_such_pid = (1 << 22) + 1  # above Linux's largest pid_max
    request.reply_segment.CopyFrom(
        graph_pb2.ReplySegment(pid=no_such_pid, fd=3, inode=7, size=1 << 20, nonce=bytes(16))
    )
    reply = fs.connection.call("GraphService", "SampleFromNodes", request).message
    assert f"cannot open the reply segment (pid {no_such_pid}, fd 3)" in reply.reply_segment.refused
    assert "/proc" not in reply.reply_segment.refused
    assert not reply.reply_segment.used and reply.node[0].ids.data
    pool = ReplySegmentPool()
    segment = pool.acquire()
    assert pool.lend(segment, reply) is None  # nothing was placed there
    assert pool.refused == reply.reply_segment.refused
    assert pool.acquire() is None and pool.idle == 0  # refused once: the socket from then on
    assert fs.connection.is_serving()


def test_a_sampler_whose_segment_is_refused_decodes_the_reply_from_the_payload(
    homo_server: ServerProcess, homo_graph: Data,
) -> None:
    """A server that cannot use the offered segment (another container, another user) sends the
    arrays in the payload; the sampler must read them there."""
    from gnnstore.proto.reply_segment import ReplySegment

    fs, _ = connect(homo_server.address, shared_memory=True)
    pool = fs.connection.reply_segments()
    wrong = ReplySegment(1 << 20)
    wrong.message.nonce = bytes(16)  # the server checks it and refuses the segment
    pool._free.append(wrong)  # the next call offers this one
    seeds = NodeSamplerInput(input_id=None, node=torch.tensor([4, 2, 9]))
    refused = RemoteNeighborSampler(fs, [3], seed=5, feature_store=fs).sample_from_nodes(seeds)
    assert pool.refused is not None and "nonce" in pool.refused
    plain_fs, _ = connect(homo_server.address, shared_memory=False)
    plain = RemoteNeighborSampler(plain_fs, [3], seed=5, feature_store=plain_fs).sample_from_nodes(seeds)
    assert torch.equal(refused.node, plain.node) and torch.equal(refused.row, plain.row)
    assert torch.equal(fs.get_tensor(None, "x", refused.node), homo_graph.x[refused.node])
