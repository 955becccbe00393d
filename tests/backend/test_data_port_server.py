"""The data port on its own: one-use tickets, bounds in bytes, time and connections, strangers' bytes.

A real ``DataPort`` on 127.0.0.1, read by the real ``DataPortClient`` and by raw sockets that
behave as a careless or hostile client would.
"""
from __future__ import annotations

import socket
import time

import numpy as np
import pytest

from gnnstore.backend.service.data_port import MIN_DATA_PORT_BYTES, DataPort, PayloadTickets
from gnnstore.client.data_port import DataPortClient, DataPortUnreachable
from gnnstore.common.errors import ServerUnavailableError
from gnnstore.proto import graph_pb2
from gnnstore.proto.data_port_wire import HEADER, TICKET_BYTES, UNKNOWN
from gnnstore.proto.reply_payload import PayloadWriter


def payload_of(*arrays: np.ndarray) -> tuple[PayloadWriter, bytes]:
    """A payload of ``arrays`` and the bytes a client must receive for it (zeros in the gaps)."""
    writer = PayloadWriter()
    for array in arrays:
        writer.place(np.ascontiguousarray(array).view(np.uint8).reshape(-1))
    expected = bytearray(writer.size)
    for offset, raw in writer.arrays:
        expected[offset:offset + raw.size] = raw.tobytes()
    return writer, bytes(expected)


def big_payload(seed: int = 0) -> tuple[PayloadWriter, bytes]:
    rng = np.random.default_rng(seed)
    return payload_of(
        rng.integers(0, 1 << 40, 50_001, dtype=np.int64),  # odd lengths: gaps before the next array
        np.empty(0, dtype=np.float32),
        rng.standard_normal((MIN_DATA_PORT_BYTES // 4 // 7, 7)).astype(np.float32),
    )


@pytest.fixture
def plane() -> DataPort:
    plane = DataPort("127.0.0.1", idle_s=5.0, io_timeout_s=5.0, max_connections=4, max_host_connections=4)
    plane.start()
    yield plane
    plane.close()


def _wait_for(condition, seconds: float = 10.0) -> bool:  # noqa: ANN001
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)
    return condition()


def test_a_ticket_reads_its_payload_exactly_once(plane: DataPort) -> None:
    client = DataPortClient("127.0.0.1", None)
    payloads = [big_payload(seed) for seed in range(3)]
    tickets = [plane.hold(writer) for writer, _ in payloads]
    assert all(t is not None and len(t.ticket) == TICKET_BYTES for t in tickets)
    assert len({t.ticket for t in tickets}) == 3
    for ticket, (_, expected) in zip(tickets, payloads):
        assert bytes(client.fetch(ticket, timeout=5)) == expected
    assert plane.tickets.held_bytes == 0 and len(plane.tickets) == 0
    assert plane.connections() == 1, "the three reads shared one connection"
    with pytest.raises(ServerUnavailableError, match="^the data port 127.0.0.1:[0-9]+ holds no payload under this"):
        client.fetch(tickets[0], timeout=5)
    client.close()


def test_small_payloads_stay_in_the_grpc_reply(plane: DataPort) -> None:
    writer, _ = payload_of(np.arange(1000, dtype=np.int64))
    assert plane.hold(writer) is None
    assert len(plane.tickets) == 0


def test_held_bytes_are_bounded_and_expire() -> None:
    now = [0.0]
    writers = [big_payload(seed)[0] for seed in range(3)]
    tickets = PayloadTickets(
        max_held_bytes=writers[0].size * 5 // 2, max_owner_share=1.0, ttl_s=10.0, clock=lambda: now[0]
    )
    first, second = tickets.issue(writers[0]), tickets.issue(writers[1])
    assert first and second
    assert tickets.issue(writers[2]) is None, "past the bound the reply goes through gRPC"
    assert tickets.take(first) == ("", writers[0])
    now[0] = 5.0
    third = tickets.issue(writers[2])
    assert third is not None
    now[0] = 10.5  # `second` is past its time, `third` is not
    assert tickets.take(second) is None
    assert tickets.held_bytes == writers[2].size
    assert tickets.take(third) == ("", writers[2])
    assert tickets.held_bytes == 0


def test_one_client_cannot_take_every_held_byte() -> None:
    writers = [big_payload(seed)[0] for seed in range(4)]
    tickets = PayloadTickets(max_held_bytes=writers[0].size * 4, max_owner_share=0.5)
    hoarder = [tickets.issue(w, "ipv4:10.0.0.1:1000") for w in writers[:3]]
    assert hoarder[0] and hoarder[1] and hoarder[2] is None, "half the bytes, then no more for it"
    assert tickets.issue(writers[2], "ipv4:10.0.0.2:2000") is not None, "another client still has room"
    assert tickets.take(hoarder[0]) == ("ipv4:10.0.0.1:1000", writers[0])
    assert tickets.issue(writers[3], "ipv4:10.0.0.1:1000") is not None, "a read frees the client's share"


def test_strangers_get_nothing_and_the_port_keeps_serving(plane: DataPort) -> None:
    writer, expected = big_payload()
    ticket = plane.hold(writer)
    # A guessed ticket: told there is none, and the connection is closed.
    with socket.create_connection(("127.0.0.1", plane.port), timeout=5) as stranger:
        stranger.sendall(b"\0" * TICKET_BYTES)
        assert stranger.recv(HEADER.size) == HEADER.pack(UNKNOWN, 0)
        assert stranger.recv(1) == b""
    # Half a ticket, then silence: cut after the idle time, not held forever.
    with socket.create_connection(("127.0.0.1", plane.port), timeout=10) as slow:
        slow.sendall(ticket.ticket[:5])
        began = time.monotonic()
        assert slow.recv(1) == b""
        assert time.monotonic() - began < 8
    # Garbage of every length, then leaving at once.
    for junk in (b"", b"x", b"GET / HTTP/1.1\r\n\r\n", bytes(range(256)) * 4):
        with socket.create_connection(("127.0.0.1", plane.port), timeout=5) as rude:
            rude.sendall(junk)
    # The real ticket still reads its payload: the half ticket above was not a guess at it.
    client = DataPortClient("127.0.0.1", None)
    assert bytes(client.fetch(ticket, timeout=5)) == expected
    client.close()


def test_connections_are_bounded_and_freed(plane: DataPort) -> None:
    idle = [socket.create_connection(("127.0.0.1", plane.port), timeout=5) for _ in range(4)]
    deadline = time.monotonic() + 5
    while plane.connections() < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert plane.connections() == 4
    with socket.create_connection(("127.0.0.1", plane.port), timeout=5) as fifth:
        assert fifth.recv(1) == b"", "the fifth connection is closed at once"
    writer, expected = big_payload()
    ticket = plane.hold(writer)
    for conn in idle:
        conn.close()
    while plane.connections() and time.monotonic() < deadline + 5:
        time.sleep(0.01)
    client = DataPortClient("127.0.0.1", None)
    assert bytes(client.fetch(ticket, timeout=5)) == expected
    client.close()


def test_a_client_that_stops_reading_is_cut_off_and_the_payload_is_gone() -> None:
    plane = DataPort("127.0.0.1", idle_s=5.0, io_timeout_s=1.0)
    plane.start()
    try:
        writers = [payload_of(np.ones(8 << 20, dtype=np.uint8))[0] for _ in range(2)]
        tickets = [plane.hold(w) for w in writers]
        with socket.create_connection(("127.0.0.1", plane.port), timeout=10) as stalled:
            stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            stalled.sendall(tickets[0].ticket)
            deadline = time.monotonic() + 10
            while plane.connections() and time.monotonic() < deadline:
                time.sleep(0.05)
            assert plane.connections() == 0, "the send to a reader that stopped timed out"
        client = DataPortClient("127.0.0.1", None)
        assert bytes(client.fetch(tickets[1], timeout=5)) == b"\1" * (8 << 20)
        with pytest.raises(ServerUnavailableError, match="holds no payload"):
            client.fetch(tickets[0], timeout=5)
        client.close()
    finally:
        plane.close()


def test_a_reused_connection_the_server_closed_is_replaced() -> None:
    plane = DataPort("127.0.0.1", idle_s=0.3)
    plane.start()
    try:
        client = DataPortClient("127.0.0.1", None)
        first, expected_first = big_payload(1)
        assert bytes(client.fetch(plane.hold(first), timeout=5)) == expected_first
        time.sleep(1.0)  # the server closes the idle connection the client keeps
        second, expected_second = big_payload(2)
        assert bytes(client.fetch(plane.hold(second), timeout=5)) == expected_second
        client.close()
    finally:
        plane.close()


def test_connections_to_a_servers_old_data_port_are_closed_once_it_answers_on_another() -> None:
    old, new = DataPort("127.0.0.1"), DataPort("127.0.0.1")
    old.start()
    new.start()
    try:
        client = DataPortClient("127.0.0.1", None)
        first, expected_first = big_payload(1)
        assert bytes(client.fetch(old.hold(first), timeout=5)) == expected_first
        assert old.connections() == 1, "kept for the next batch"
        second, expected_second = big_payload(2)
        assert bytes(client.fetch(new.hold(second), timeout=5)) == expected_second
        deadline = time.monotonic() + 5
        while old.connections() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert old.connections() == 0 and new.connections() == 1
        client.close()
    finally:
        old.close()
        new.close()


def test_an_unreachable_port_says_which_and_what_to_do() -> None:
    plane = DataPort("127.0.0.1")
    port = plane.start()
    plane.close()
    ticket = graph_pb2.DataPortTicket(ticket=b"\1" * TICKET_BYTES, port=port, size=10)
    with pytest.raises(DataPortUnreachable, match=rf"127\.0\.0\.1:{port}.*--data-port"):
        DataPortClient("127.0.0.1", None).fetch(ticket, timeout=5)


def read_all(conn: socket.socket) -> bytes:
    """Every byte until the peer closes; a reset (it closed with our bytes unread) ends it too."""
    data = b""
    while True:
        try:
            chunk = conn.recv(1 << 16)
        except ConnectionResetError:
            return data
        if not chunk:
            return data
        data += chunk


def send_until_closed(conn: socket.socket, pieces: list[np.ndarray]) -> None:
    """Send ``pieces`` one by one, stopping once the peer has closed (it read what it wanted)."""
    for piece in pieces:
        try:
            conn.sendall(piece.tobytes())
        except (BrokenPipeError, ConnectionResetError):
            return


def test_random_bytes_from_many_strangers_never_read_a_payload_nor_stop_the_port(plane: DataPort) -> None:
    """A fast fuzz slice of the port: random bodies in random pieces, then the real ticket still reads."""
    rng = np.random.default_rng(7)
    writer, expected = big_payload()
    ticket = plane.hold(writer)
    answers = []
    for _ in range(150):
        with socket.create_connection(("127.0.0.1", plane.port), timeout=10) as stranger:
            body = rng.integers(0, 256, int(rng.integers(TICKET_BYTES, 4 * TICKET_BYTES)), dtype=np.uint8).tobytes()
            send_until_closed(stranger, np.array_split(np.frombuffer(body, np.uint8), int(rng.integers(1, 4))))
            received = read_all(stranger)
            # 16 random bytes are never a ticket: "unknown" once, then closed (or reset before we read it)
            assert received in (b"", HEADER.pack(UNKNOWN, 0)), received
            answers.append("unknown" if received else "reset")
    assert answers.count("unknown") > 0 and len(answers) == 150
    client = DataPortClient("127.0.0.1", None)
    assert bytes(client.fetch(ticket, timeout=5)) == expected
    client.close()
    deadline = time.monotonic() + 5
    while plane.connections() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert plane.connections() == 0, "every stranger's connection is gone"


def test_a_ticket_sent_a_byte_at_a_time_is_cut_at_its_frames_deadline() -> None:
    """The idle cut used to restart at every byte: one byte every 25 s held a connection forever."""
    plane = DataPort("127.0.0.1", idle_s=2.0, io_timeout_s=2.0)
    plane.start()
    try:
        with socket.create_connection(("127.0.0.1", plane.port), timeout=10) as drip:
            began = time.monotonic()
            cut = None
            for _ in range(TICKET_BYTES - 1):  # never a whole ticket: each byte well inside any per-read timeout
                try:
                    drip.sendall(b"x")
                    drip.settimeout(0.5)
                    if drip.recv(1) == b"":
                        cut = time.monotonic() - began
                        break
                except TimeoutError:
                    continue
                except OSError:
                    cut = time.monotonic() - began
                    break
            assert cut is not None and cut < 2.0 + 1.5, "a dripped ticket outlived its frame's deadline"
        # The port's thread releases the cut connection a moment after the client sees it closed.
        assert _wait_for(lambda: plane.connections() == 0, 5.0)
        # A client that reads and then idles is cut idle_s after its last payload, not before.
        client = DataPortClient("127.0.0.1", None)
        writer, expected = big_payload()
        assert bytes(client.fetch(plane.hold(writer, "trainer"), timeout=5)) == expected
        assert plane.connections() == 1
        assert _wait_for(lambda: plane.connections() == 0, 5.0)
        client.close()
    finally:
        plane.close()


def test_one_host_cannot_fill_the_port() -> None:
    plane = DataPort("127.0.0.1", max_connections=4, max_host_connections=2)
    plane.start()
    try:
        mine = [socket.create_connection(("127.0.0.1", plane.port), timeout=5) for _ in range(2)]
        assert _wait_for(lambda: plane.connections() == 2)
        with socket.create_connection(("127.0.0.1", plane.port), timeout=5) as third:
            assert third.recv(1) == b"", "a third connection from the same host is closed at once"
        other = socket.create_connection(("127.0.0.1", plane.port), timeout=5, source_address=("127.0.0.2", 0))
        assert _wait_for(lambda: plane.connections() == 3), "another host still gets in"
        for conn in [*mine, other]:
            conn.close()
    finally:
        plane.close()


def test_a_full_port_leaves_the_payload_in_the_reply_for_clients_without_a_connection() -> None:
    """A full port used to hand out tickets nobody could read: the client then sampled again."""
    plane = DataPort("127.0.0.1", max_connections=2, max_host_connections=2)
    plane.start()
    try:
        reader = DataPortClient("127.0.0.1", None)
        writer, expected = big_payload(1)
        assert bytes(reader.fetch(plane.hold(writer, "reader"), timeout=5)) == expected  # keeps its connection
        stranger = socket.create_connection(("127.0.0.1", plane.port), timeout=5)
        assert _wait_for(lambda: plane.connections() == 2)
        assert plane.full_for("newcomer") and not plane.full_for("reader")
        assert plane.hold(big_payload(2)[0], "newcomer") is None, "no ticket it could not read"
        writer, expected = big_payload(3)
        assert bytes(reader.fetch(plane.hold(writer, "reader"), timeout=5)) == expected
        stranger.close()
        assert _wait_for(lambda: not plane.full_for("newcomer"))
        assert plane.hold(big_payload(4)[0], "newcomer") is not None
        reader.close()
    finally:
        plane.close()
