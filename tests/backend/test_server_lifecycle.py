"""Clients that come and go, and a stop during a Put: the server neither pins their memory nor
closes its store under a running write."""
from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

import pytest
import torch
import warm_launcher
from pyg_views import features_of
from served import ServerProcess, ingest
from torch_geometric.sampler import NodeSamplerInput

from gnnstore.client import Connection, RemoteNeighborSampler, connect
from gnnstore.common.errors import ServerUnavailableError
from gnnstore.ingest.generator import generate_graph
from gnnstore.proto import admin_pb2
from gnnstore.stores.data_dir import open_stores

CHILD = """
import sys, torch
from torch_geometric.sampler import NodeSamplerInput
from gnnstore.client import RemoteNeighborSampler, connect
fs, _ = connect(sys.argv[1], shared_memory=True)
sampler = RemoteNeighborSampler(fs, [3, 2], feature_store=fs)
for _ in range(3):
    sampler.sample_from_nodes(NodeSamplerInput(input_id=None, node=torch.arange(16)))
assert fs.connection.reply_segments().placed_bytes > 0
"""


def _mapped(address: str) -> int:
    return Connection(address).call("AdminService", "Stats", admin_pb2.StatsRequest()).reply_segments_mapped


def test_segments_of_clients_that_exited_are_unmapped(tmp_path: Path) -> None:
    data_dir = ingest(generate_graph(300, 5.0, 8, 3, seed=2), tmp_path / "data")
    with ServerProcess(data_dir, "--read-only", log=tmp_path / "server.log") as server:
        fs, _ = connect(server.address, shared_memory=True)
        sampler = RemoteNeighborSampler(fs, [3, 2])  # no rows held for a loader: one segment, reused
        for _ in range(3):  # clients churning, one after another
            warm_launcher.run([sys.executable, "-c", CHILD, server.address], check=True, timeout=120)
            assert _mapped(server.address) >= 1  # the child's segment, until a sweep sees it gone
            time.sleep(1.1)  # mappings are swept at most once a second, when a request comes
            batch = sampler.sample_from_nodes(NodeSamplerInput(input_id=None, node=torch.arange(4)))
            assert batch.node.numel() >= 4
            assert _mapped(server.address) == 1  # only this process's segment is left
            del batch  # its segment is lent again to the next call


def test_a_stop_during_a_put_waits_for_it_and_the_store_holds_old_or_new(tmp_path: Path) -> None:
    data_dir = ingest(generate_graph(300, 5.0, 8, 3, seed=2), tmp_path / "data")
    big = torch.arange(1_500_000 * 16, dtype=torch.float32).reshape(-1, 16)  # ~96 MB
    server = ServerProcess(data_dir, "--shutdown-grace-s", "0", log=tmp_path / "server.log")
    try:
        fs, _ = connect(server.address, shared_memory=False, timeout=0.5)
        try:
            fs.put_tensor(big, group_name=None, attr_name="big", index=None)
        except ServerUnavailableError:
            pass  # the client gave up at its deadline: the Put goes on in the server
        else:
            raise AssertionError("the Put finished within 0.5 s; the test needs a slower one")
    finally:
        code = server.stop()
    log = (tmp_path / "server.log").read_text()
    assert code == 0, log
    assert "NoneType" not in log and "Traceback" not in log, log
    with open_stores(data_dir, read_only=True) as stores:
        schema = {s.attr_name: s for s in features_of(stores).tensor_schema()}
        if "big" in schema:  # committed before the stop: whole
            assert torch.equal(features_of(stores).get_tensor(group_name=None, attr_name="big", index=None), big)
        assert {"x", "y"} <= set(schema)


def test_signals_dump_stacks_keep_serving_and_stop_gracefully(tmp_path: Path) -> None:
    """SIGUSR1 writes every thread's stack to the log and the server goes on, as it does after
    SIGHUP; SIGINT, also when sent at once after the start-up line (as ServerProcess sends
    SIGTERM), stops it with exit code 0."""
    data_dir = ingest(generate_graph(300, 5.0, 8, 3, seed=2), tmp_path / "data")
    log = tmp_path / "server.log"
    for attempt in range(3):  # a signal right after the start-up line is the case that once hung
        server = ServerProcess(data_dir, "--read-only", log=log)
        if attempt == 0:
            server.proc.send_signal(signal.SIGUSR1)
            server.proc.send_signal(signal.SIGHUP)
            fs, _ = connect(server.address)
            assert tuple(fs.get_tensor_size(group_name=None, attr_name="x")) == (300, 8)
            assert "most recent call first" in log.read_text()  # faulthandler's stack dump
        server.proc.send_signal(signal.SIGINT)
        assert server.proc.wait(30) == 0
        assert "received SIGINT; stopping" in log.read_text()
        server.stop()


@pytest.mark.parametrize(
    ("flags", "held"), [((), "GiB in memory |"), (("--resident-feature-bytes", "0"), "GiB read through the page cache |")]
)
def test_the_served_features_are_held_in_memory_unless_the_budget_is_smaller(
    tmp_path: Path, flags: tuple[str, ...], held: str
) -> None:
    data = generate_graph(300, 5.0, 8, 3, seed=2)
    data_dir = ingest(data, tmp_path / "data")
    for start in ("exports the tier", "opens it again"):
        log = tmp_path / f"server-{start.replace(' ', '-')}.log"
        with ServerProcess(data_dir, "--read-only", *flags, log=log) as server:
            fs, _ = connect(server.address)
            ids = torch.tensor([299, 0, 17, 17])
            assert torch.equal(fs.get_tensor(group_name=None, attr_name="x", index=ids), data.x[ids])
        assert held in server.startup_line, start
