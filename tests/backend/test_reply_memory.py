"""The memory replies' rows may take at once: reserved before gathering, freed with the payload."""
from __future__ import annotations

import gc
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from served import ingest
from torch_geometric.loader import NodeLoader

from gnnstore.backend.server.server import GnnStoreServer
from gnnstore.backend.service.data_port import DataPort
from gnnstore.backend.service.reply_memory import ReplyMemory
from gnnstore.client import RemoteNeighborSampler, connect
from gnnstore.client.data_port import DataPortClient
from gnnstore.common.errors import ResourceExhaustedError, ServerUnavailableError
from gnnstore.config import ServerConfig
from gnnstore.ingest.generator import generate_graph
from gnnstore.proto.reply_payload import PayloadWriter

MIB = 1 << 20


def _wait_for(condition, seconds: float = 10.0) -> bool:  # noqa: ANN001
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)
    return condition()


def _reserve_later(memory: ReplyMemory, nbytes: int, owner: object) -> tuple[threading.Thread, list]:
    """``memory.reserve`` on a thread; the list receives ``"reserved"`` or the exception."""
    outcome: list = []

    def run() -> None:
        try:
            memory.reserve(nbytes, owner)
            outcome.append("reserved")
        except Exception as exc:  # noqa: BLE001 - the test inspects it
            outcome.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


def test_replies_within_the_capacity_go_at_once_and_the_next_waits_until_one_is_freed() -> None:
    memory = ReplyMemory(100 * MIB)
    first, second = PayloadWriter(), PayloadWriter()
    memory.reserve(60 * MIB, first)
    memory.reserve(40 * MIB, second)
    assert memory.used == 100 * MIB
    third = PayloadWriter()
    thread, outcome = _reserve_later(memory, 30 * MIB, third)
    time.sleep(0.2)
    assert outcome == [] and memory.used == 100 * MIB  # waiting: it does not fit
    del first
    gc.collect()
    thread.join(5)
    assert outcome == ["reserved"] and memory.used == 70 * MIB
    del second, third
    gc.collect()
    assert memory.used == 0


def test_a_reply_larger_than_the_capacity_runs_alone() -> None:
    memory = ReplyMemory(10 * MIB)
    small, huge = PayloadWriter(), PayloadWriter()
    memory.reserve(5 * MIB, small)
    thread, outcome = _reserve_later(memory, 50 * MIB, huge)
    time.sleep(0.2)
    assert outcome == []  # not beside another
    del small
    gc.collect()
    thread.join(5)
    assert outcome == ["reserved"] and memory.used == 50 * MIB


def test_a_reply_that_finds_no_room_in_time_is_refused_with_the_figures() -> None:
    memory = ReplyMemory(10 * MIB, wait_s=0.3)
    held = PayloadWriter()
    memory.reserve(8 * MIB, held)
    started = time.monotonic()
    with pytest.raises(ResourceExhaustedError, match=r"8 of 10 MiB by replies not yet sent; this one needs 4 MiB"):
        memory.reserve(4 * MIB, PayloadWriter())
    assert 0.3 <= time.monotonic() - started < 3
    assert memory.used == 8 * MIB  # the refused one took nothing


def test_closing_refuses_the_waiting_replies_at_once() -> None:
    memory = ReplyMemory(10 * MIB, wait_s=30)
    held = PayloadWriter()
    memory.reserve(10 * MIB, held)
    thread, outcome = _reserve_later(memory, 1 * MIB, PayloadWriter())
    time.sleep(0.1)
    memory.close()
    thread.join(5)
    assert len(outcome) == 1 and isinstance(outcome[0], ServerUnavailableError)
    with pytest.raises(ServerUnavailableError, match="stopping"):
        memory.reserve(1, PayloadWriter())


def test_a_payload_held_for_the_data_port_keeps_its_reservation_until_its_client_reads_it() -> None:
    memory = ReplyMemory(100 * MIB)
    plane = DataPort("127.0.0.1")
    plane.start()
    try:
        writer = PayloadWriter()
        writer.place(np.arange(1 << 18, dtype=np.int64).view(np.uint8))
        memory.reserve(2 * MIB, writer)
        ticket = plane.hold(writer)
        del writer
        gc.collect()
        assert memory.used == 2 * MIB  # the port holds the payload for its client
        client = DataPortClient("127.0.0.1", None)
        assert len(client.fetch(ticket, timeout=5)) >= 2 * MIB
        # freed once sent, while the client's connection waits to send its next ticket
        assert _wait_for(lambda: gc.collect() is not None and memory.used == 0)
        client.close()
    finally:
        plane.close()


def test_a_payload_no_client_comes_for_gives_its_reservation_back_when_its_ticket_expires() -> None:
    memory = ReplyMemory(100 * MIB)
    plane = DataPort("127.0.0.1", ticket_ttl_s=2.0)  # long enough to see it held under load
    plane.start()
    try:
        writer = PayloadWriter()
        writer.place(np.zeros(1 << 20, dtype=np.uint8))
        memory.reserve(1 * MIB, writer)
        assert plane.hold(writer) is not None
        del writer
        gc.collect()
        assert memory.used == 1 * MIB
        # nothing else happens on the port: the reaper alone drops it
        assert _wait_for(lambda: gc.collect() is not None and memory.used == 0, seconds=10)
        assert len(plane.tickets) == 0
    finally:
        plane.close()


def test_a_served_epoch_over_payloads_gives_back_every_reserved_byte(tmp_path: Path) -> None:
    data_dir = ingest(generate_graph(2000, 8.0, 64, 3, seed=2), tmp_path / "data")
    server = GnnStoreServer(ServerConfig(data_dir=data_dir, port=0, read_only=True))
    address = server.start()
    try:
        assert server.data.replies.capacity > 0
        fs, gs = connect(address, shared_memory=False)
        sampler = RemoteNeighborSampler(fs, [5, 5], feature_store=fs)
        loader = NodeLoader((fs, gs), node_sampler=sampler, input_nodes=torch.arange(2000), batch_size=256)
        assert sum(1 for _ in loader) == 8
        fs.connection.close()
        assert _wait_for(lambda: gc.collect() is not None and server.data.replies.used == 0)
    finally:
        server.stop(grace=5.0)
