"""One client's huge requests against another's batches: the second's latency alone and beside it.

A generated graph (default 200k nodes, 5M edges) is served by one ``gnnstore serve``. The
victim asks for ordinary batches (1024 seeds, fanouts [15, 10]) one after another and
measures each reply's latency, first alone, then while a hog process sends large requests
that stay within the server's limits (16384 seeds, fanouts [50, 50]; bulk work, see
``SamplingPools``) from 4 threads at once; ``--rounds`` such rounds, since one round's p99
moves a lot on a shared machine. The issue's target: the victim's p99 beside the hog within 2x
of its p99 alone (pooled over the rounds).

Each round measures the hog on both of a large reply's paths: the data port, as the SDK takes
it, and the gRPC reply, as a client that never reads the data port gets it (grpcio copies a
reply into its send buffer while holding the GIL, ~30 ms for 120 MB, and every other call's
Python waits for that). The hog takes its replies as raw bytes and runs at nice 19
(``--hog-nice``): it stands for a client on another machine, whose CPU is not this host's.

    nice python -m benchmarks.fairness
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from torch_geometric.sampler import NodeSamplerInput

from benchmarks.loader import graph_arguments, prepare
from gnnstore.backend.server.server_process import ServerProcess

VICTIM = ([15, 10], 1024)
HOG = ([50, 50], 16384)
HOG_PATHS = ("data-port", "grpc")


def latencies(address: str, nodes: int, count: int) -> list[float]:
    """Seconds per batch of ``count`` victim batches, one after another."""
    from gnnstore.client import RemoteNeighborSampler, connect

    fs, _ = connect(address, shared_memory=False)
    sampler = RemoteNeighborSampler(fs, VICTIM[0], seed=1)
    generator = torch.Generator().manual_seed(2)
    out = []
    for _ in range(count):
        seeds = torch.randint(nodes, (VICTIM[1],), generator=generator)
        started = time.perf_counter()
        sampler.sample_from_nodes(NodeSamplerInput(input_id=None, node=seeds))
        out.append(time.perf_counter() - started)
    return out


def hog(
    address: str, nodes: int, path: str, nice: int, stop: multiprocessing.Event, sent: multiprocessing.Value
) -> None:
    """Large requests from 4 threads on one connection until ``stop``, their payloads read from
    the data port or taken in the gRPC reply (``path``); replies stay raw bytes, not decoded."""
    from concurrent.futures import ThreadPoolExecutor

    import grpc

    from gnnstore.client.data_port import DataPortClient
    from gnnstore.client.sampler_wire import node_input_to_proto
    from gnnstore.proto import graph_pb2
    from gnnstore.proto.sampling_options import options_to_proto

    os.nice(nice)
    limit = 1 << 30
    channel = grpc.insecure_channel(address, options=[("grpc.max_receive_message_length", limit)])
    call = channel.unary_unary("/gnnstore.v1.GraphService/SampleFromNodes")

    def loop(thread: int) -> None:
        generator = torch.Generator().manual_seed(thread)
        data_port = DataPortClient(address.rsplit(":", 1)[0], None)
        while not stop.is_set():
            request = node_input_to_proto(NodeSamplerInput(input_id=None, node=torch.randint(nodes, (HOG[1],), generator=generator)))
            request.options.CopyFrom(options_to_proto(HOG[0], replace=False, disjoint=False, seed=thread))
            request.accept_payload = True  # as the SDK asks: arrays after the message, not in it
            request.accept_data_port = path == "data-port"
            reply = call(request.SerializeToString(), timeout=600)
            if request.accept_data_port:
                ticket = graph_pb2.SampleResponse.FromString(reply).bulk
                assert ticket.size, "the server sent the payload through gRPC, not the data port"
                data_port.fetch(ticket, timeout=600)
            with sent.get_lock():
                sent.value += 1

    with ThreadPoolExecutor(4) as threads:
        list(threads.map(loop, range(4)))  # an error ends the run with its traceback


def summary(name: str, seconds: list[float]) -> str:
    ms = np.array(seconds) * 1e3
    return f"{name:<36} p50 {np.percentile(ms, 50):7.1f} ms  p99 {np.percentile(ms, 99):7.1f} ms  max {ms.max():7.1f} ms"


def beside_a_hog(address: str, nodes: int, batches: int, path: str, nice: int) -> tuple[list[float], float]:
    """The victim's latencies while a hog process runs, and the hog's requests per second."""
    context = multiprocessing.get_context("spawn")
    stop, sent = context.Event(), context.Value("i", 0)
    hogging = context.Process(target=hog, args=(address, nodes, path, nice, stop, sent))
    hogging.start()
    while sent.value < 4:  # the hog's process is up and its requests keep the server busy
        assert hogging.is_alive(), "the hog failed; its traceback is above"
        time.sleep(0.1)
    started, before = time.perf_counter(), sent.value
    beside = latencies(address, nodes, batches)
    hog_rate = (sent.value - before) / (time.perf_counter() - started)
    stop.set()
    hogging.join(600)
    assert hogging.exitcode == 0, "the hog failed; its traceback is above"
    return beside, hog_rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    graph_arguments(parser)
    parser.add_argument("--batches", type=int, default=200, help="victim batches per phase")
    parser.add_argument("--rounds", type=int, default=3,
                        help="rounds of the victim alone and beside each hog; the pooled p99s are the figure")
    parser.add_argument("--hog-nice", type=int, default=19,
                        help="the hog's nice increment (0: it shares this host's CPU as the victim does)")
    parser.set_defaults(nodes=200_000)
    args = parser.parse_args()
    alone_all: list[float] = []
    beside_all: dict[str, list[float]] = {path: [] for path in HOG_PATHS}
    with tempfile.TemporaryDirectory(prefix="gnnstore-fairness-") as tmp:
        folder = Path(tmp) / "graph"
        folder.mkdir()
        _, data_dir, _ = prepare(args.nodes, args.avg_degree, args.dim, args.out_degree_exponent, folder)
        with ServerProcess(data_dir, "--read-only", log=Path(tmp) / "server.log") as server:
            latencies(server.address, args.nodes, 20)  # warm-up: kernels compiled, pages in
            for round_ in range(1, args.rounds + 1):
                alone = latencies(server.address, args.nodes, args.batches)
                alone_all += alone
                line = f"round {round_}: victim p99 alone {np.percentile(alone, 99) * 1e3:.1f} ms"
                for path in HOG_PATHS:
                    beside, hog_rate = beside_a_hog(server.address, args.nodes, args.batches, path, args.hog_nice)
                    beside_all[path] += beside
                    ratio = np.percentile(beside, 99) / np.percentile(alone, 99)
                    line += (f"; beside the hog by {path} {np.percentile(beside, 99) * 1e3:.1f} ms ({ratio:.2f}x, "
                             f"hog {hog_rate:.1f} requests/s)")
                print(line, flush=True)
    print(f"hog: {HOG[1]} seeds x {HOG[0]} from 4 threads, at nice +{args.hog_nice}")
    print(summary(f"victim alone ({len(alone_all)})", alone_all))
    for path in HOG_PATHS:
        print(summary(f"beside the hog by {path} ({len(beside_all[path])})", beside_all[path]))
    for path in HOG_PATHS:
        ratio = np.percentile(beside_all[path], 99) / np.percentile(alone_all, 99)
        print(f"pooled over {args.rounds} rounds, hog by {path}: victim p99 beside / alone: {ratio:.2f}x")


if __name__ == "__main__":
    main()
