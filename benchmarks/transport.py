"""The data port against Arrow Flight, for moving one batch's payload from server to trainer.

Issue 42 asks whether Arrow Flight (``pyarrow.flight``: columnar batches over gRPC, with TLS,
token auth and several locations per stream built in) should replace the hand-written data port.
This measures what each costs to move the same payload: a sampled batch's node ids, feature rows
and edge index (default 22,000 rows of 100 float32 and 160,000 edges: about 11.5 MB, the size
of a batch's misses with a 20% static cache). A server child process holds both a data port
and a Flight server over the same arrays; the trainer (this process) fetches each batch and
reads it as numpy arrays (both without a copy), checking the rows it got. Per transport: CPU
time per batch of the trainer and of the server (process CPU, the steady figure on a shared
machine), wall time per batch, and bytes on the wire per batch. Over loopback, then across a
link capped with ``tc ... tbf`` in a network namespace (``benchmarks.link``, root only).

The ticket's trip is left out on both sides: in gnnstore it rides in the sampling reply, and a
Flight ticket would too. Plaintext on both (each supports TLS).

    nice python -m benchmarks.transport
"""
from __future__ import annotations

import argparse
import multiprocessing
import time
from multiprocessing.connection import Connection

import numpy as np
import pyarrow as pa
import pyarrow.flight as flight

from benchmarks.link import capped_loopback
from benchmarks.results_page import write_page
from gnnstore.backend.service.data_port import DataPort
from gnnstore.client.data_port import DataPortClient
from gnnstore.proto import graph_pb2
from gnnstore.proto.reply_payload import PayloadWriter

TRANSPORTS = ("data port", "Arrow Flight")


def batch_arrays(rows: int, dim: int, edges: int) -> dict[str, np.ndarray]:
    """One batch's payload: node ids, their feature rows, the edge index (seeded)."""
    rng = np.random.default_rng(42)
    return {
        "n_id": rng.integers(0, 1 << 30, rows, dtype=np.int64),
        "x": rng.standard_normal((rows, dim), dtype=np.float32),
        "edge_index": rng.integers(0, rows, (2, edges), dtype=np.int64),
    }


def as_table(arrays: dict[str, np.ndarray]) -> pa.Table:
    """The arrays as one row of list columns (their lengths differ), without a copy."""
    columns = {
        name: pa.LargeListArray.from_arrays(pa.array([0, array.size], pa.int64()), pa.array(array.reshape(-1)))
        for name, array in arrays.items()
    }
    return pa.table(columns)


class _FlightServer(flight.FlightServerBase):
    def __init__(self, table: pa.Table) -> None:
        super().__init__("grpc://127.0.0.1:0")
        self._table = table

    def do_get(self, context: flight.ServerCallContext, ticket: flight.Ticket) -> flight.RecordBatchStream:
        return flight.RecordBatchStream(self._table)


def serve(conn: Connection, rows: int, dim: int, edges: int) -> None:
    """The server child: a data port and a Flight server over one batch; answers the pipe."""
    arrays = batch_arrays(rows, dim, edges)
    writer = PayloadWriter()
    layout = {name: (writer.place(a.view(np.uint8).reshape(-1)), a.dtype.str, a.shape) for name, a in arrays.items()}
    port = DataPort("127.0.0.1")
    port.start()
    table = as_table(arrays)
    flight_server = _FlightServer(table)
    conn.send((port.port, flight_server.port, layout, writer.size, _ipc_bytes(table)))
    while (command := conn.recv()) != "stop":
        if command == "ticket":
            conn.send(port.hold(writer, "bench").SerializeToString())
        elif command == "cpu":
            conn.send(time.process_time())
    port.close()
    flight_server.shutdown()


def _ipc_bytes(table: pa.Table) -> int:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as stream:
        stream.write_table(table)
    return sink.getvalue().size


def measure(link: str, args: argparse.Namespace) -> list[dict]:
    """Both transports against one server child: the rows of the results table."""
    ours, theirs = multiprocessing.get_context("spawn").Pipe()
    child = multiprocessing.get_context("spawn").Process(target=serve, args=(theirs, args.rows, args.dim, args.edges))
    child.start()
    try:
        data_port, flight_port, layout, payload_bytes, ipc_bytes = ours.recv()
        want = batch_arrays(args.rows, args.dim, args.edges)
        port_client = DataPortClient("127.0.0.1", None)
        flight_client = flight.connect(f"grpc://127.0.0.1:{flight_port}")

        def by_data_port() -> dict[str, np.ndarray]:
            ours.send("ticket")
            ticket = graph_pb2.DataPortTicket.FromString(ours.recv())
            buffer = port_client.fetch(ticket, timeout=60)
            return {name: np.frombuffer(buffer, np.dtype(dtype), int(np.prod(shape)), offset).reshape(shape)
                    for name, (offset, dtype, shape) in layout.items()}

        def by_flight() -> dict[str, np.ndarray]:
            table = flight_client.do_get(flight.Ticket(b"batch")).read_all()
            return {name: table.column(name).chunk(0).values.to_numpy(zero_copy_only=True).reshape(want[name].shape)
                    for name in want}

        rows = []
        for transport, fetch in zip(TRANSPORTS, (by_data_port, by_flight)):
            for name, got in fetch().items():  # also a warm-up
                if not np.array_equal(got, want[name]):
                    raise AssertionError(f"{transport} delivered other {name} than the server holds")
            for _ in range(args.warmup):
                fetch()
            ours.send("cpu")
            server_before, cpu_before, wall_before = ours.recv(), time.process_time(), time.perf_counter()
            for _ in range(args.batches):
                got = fetch()
                if got["x"][-1, -1] != want["x"][-1, -1]:
                    raise AssertionError(f"{transport} delivered a wrong last row")
            wall, cpu = time.perf_counter() - wall_before, time.process_time() - cpu_before
            ours.send("cpu")
            server_cpu = ours.recv() - server_before
            rows.append({
                "link": link, "transport": transport,
                "trainer_cpu_ms": 1000 * cpu / args.batches, "server_cpu_ms": 1000 * server_cpu / args.batches,
                "wall_ms": 1000 * wall / args.batches,
                "wire_mb": (payload_bytes if transport == "data port" else ipc_bytes) / 1e6,
            })
            print(rows[-1], flush=True)
        port_client.close()
        flight_client.close()
        ours.send("stop")
    finally:
        child.join(30)
        if child.is_alive():
            child.kill()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=22_000, help="feature rows a batch")
    parser.add_argument("--dim", type=int, default=100, help="float32 features a row")
    parser.add_argument("--edges", type=int, default=160_000, help="edges a batch")
    parser.add_argument("--batches", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--link", default="10gbit", help="the capped link's rate (tc units)")
    args = parser.parse_args()
    rows = measure("loopback", args)
    skipped = ""
    with capped_loopback(args.link) as why_not:
        if why_not is None:
            rows += measure(f"capped at {args.link}", args)
        else:
            skipped = f"\nThe capped link was skipped: {why_not}.\n"
    table = ["| link | transport | trainer CPU ms/batch | server CPU ms/batch | wall ms/batch | MB/batch on the wire |",
             "|---|---|---|---|---|---|"]
    for row in rows:
        table.append(f"| {row['link']} | {row['transport']} | {row['trainer_cpu_ms']:.2f} | "
                     f"{row['server_cpu_ms']:.2f} | {row['wall_ms']:.2f} | {row['wire_mb']:.2f} |")
    body = (f"One batch: {args.rows:,} rows of {args.dim} float32, {args.rows:,} node ids, {args.edges:,} edges; "
            f"{args.batches} batches after {args.warmup} warm-up, each transport against the same server "
            "process. CPU is process CPU time (user + system, all threads) divided by batches.\n\n"
            + "\n".join(table) + "\n" + skipped)
    print(write_page("transport", "Data port against Arrow Flight", "python -m benchmarks.transport", body))


if __name__ == "__main__":
    main()
