"""Concurrent writers through a real server: every attribute reads back its last acknowledged Put."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from gnnstore.client import connect
from gnnstore.ingest.generator import generate_graph
from served import serve_graph, start_server

THREADS, PUTS, NODES = 8, 4, 300


def _value(thread: int, put: int, rows: int) -> torch.Tensor:
    return torch.full((rows, 3), float(thread * 100 + put))


def test_concurrent_puts_never_share_a_slot_and_answer_ok_exactly_when_committed(tmp_path: Path) -> None:
    server = serve_graph(generate_graph(NODES, 4.0, 4, 3, seed=0), tmp_path)
    data_dir = server.data_dir
    try:
        fs, _ = connect(server.address, shared_memory=False)
        fs.put_tensor(torch.zeros(THREADS, 3), group_name=None, attr_name="shared", index=None)

        def writer(thread: int) -> None:
            mine, _ = connect(server.address, shared_memory=False)  # a channel of its own
            for put in range(PUTS):
                # a new attribute of its own (whole tensors) and its row of one shared attribute
                assert mine.put_tensor(_value(thread, put, NODES), group_name=None, attr_name=f"a{thread}", index=None)
                assert mine.put_tensor(_value(thread, put, 1), group_name=None, attr_name="shared",
                                       index=torch.tensor([thread]))

        with ThreadPoolExecutor(THREADS) as pool:
            list(pool.map(writer, range(THREADS)))  # any error (INTERNAL, FAILED_PRECONDITION) raises here
        _check(fs)
    finally:
        assert server.stop() == 0
    with start_server(data_dir, name="restarted") as again:
        _check(connect(again.address, shared_memory=False)[0])


def _check(fs: object) -> None:
    last = PUTS - 1
    for thread in range(THREADS):
        assert torch.equal(fs.get_tensor(group_name=None, attr_name=f"a{thread}", index=None),
                           _value(thread, last, NODES)), f"a{thread} lost its last Put"
    assert torch.equal(fs.get_tensor(group_name=None, attr_name="shared", index=None),
                       torch.cat([_value(t, last, 1) for t in range(THREADS)]))
