"""``docker compose up`` for real: build the image, bring the stack up, train through it, re-run up.

Runs when a Docker engine with Compose v2 answers and the two base images can be had (present,
or pulled); otherwise it is skipped with the reason. On machines without Docker Hub,
``../shared/tools/docker-local.sh up`` installs an engine with local stand-ins for
``python:3.11-slim`` and ``neo4j:5.26-community``; ``.ci/run`` starts it in the background and
names a marker file in ``$GNNSTORE_DOCKER_SETUP_DONE`` that this test waits for.
"""
from __future__ import annotations

import hashlib
import os
import secrets
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch_geometric.loader import NodeLoader
from torch_geometric.nn.models import GraphSAGE

from gnnstore.backend.server.server_process import free_port
from gnnstore.client import Connection, RemoteNeighborSampler, connect
from gnnstore.client.admin import server_stats

ROOT = Path(__file__).resolve().parents[1]
BASE_IMAGES = ("python:3.11-slim", "neo4j:5.26-community")
IMAGE = "gnnstore:compose-test"  # the server
TOOLS_IMAGE = "gnnstore-tools:compose-test"  # the server's plus torch and PyG: ingest, trainers
SERVER_IMAGE_LIMIT = 1.5 * 2**30
PROJECT = f"gnnstore-test-{os.getpid()}"
# pytest-timeout counts the fixture too. On a fresh machine that is a wait for the Docker
# engine's setup, which `.ci/run` starts beside the install (a few minutes), and the image build
# (~300 s, no cached layers), before a call of 300-420 s: the suite's 600 s default cut it.
pytestmark = pytest.mark.timeout(1800)
CPU_TORCH_INDEX = "https://download.pytorch.org/whl/cpu"  # the Dockerfile's default
SAMPLE = "/gnnstore.v1.GraphService/SampleFromNodes"


def _run(*argv: str, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def _why_compose_cannot_run() -> str | None:
    """Why the engine, Compose or a base image is missing, or ``None`` when all are there."""
    try:
        if _run("docker", "info", timeout=20).returncode != 0:
            return "no Docker engine answers"
        if _run("docker", "compose", "version", timeout=20).returncode != 0:
            return "no Docker Compose v2 plugin"
    except (FileNotFoundError, subprocess.TimeoutExpired) as exc:
        return f"docker cannot be run ({exc})"
    for image in BASE_IMAGES:
        if _run("docker", "image", "inspect", image, timeout=20).returncode != 0:
            pulled = _run("docker", "pull", image, timeout=300)
            if pulled.returncode != 0:
                return f"base image {image} is not here and cannot be pulled: {pulled.stderr.strip()[-300:]}"
    return None


def _wait_for_docker_setup(limit_s: float = 1500) -> None:
    """Wait for the engine setup `.ci/run` started, when it started one (bounded)."""
    marker = os.environ.get("GNNSTORE_DOCKER_SETUP_DONE")
    deadline = time.monotonic() + limit_s
    while marker and not Path(marker).exists() and time.monotonic() < deadline:
        time.sleep(5)
    if marker and Path(marker).exists() and Path(marker).read_text().strip() != "ok":
        log = Path(marker + ".log")
        pytest.skip("the Docker engine setup failed: " + (log.read_text()[-500:] if log.exists() else "no log"))


def _torch_index() -> str:
    """The Dockerfile's CPU wheel index when it answers, else '' (the default index's torch)."""
    try:
        urllib.request.urlopen(CPU_TORCH_INDEX + "/", timeout=10).close()
        return CPU_TORCH_INDEX
    except OSError:
        return ""


@pytest.fixture(scope="module")
def compose_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The built image and the environment `docker compose` runs with; `down -v` afterwards."""
    _wait_for_docker_setup()
    reason = _why_compose_cannot_run()
    if reason is not None:
        pytest.skip(reason)
    started = time.perf_counter()
    for target, tag in (("server", IMAGE), ("tools", TOOLS_IMAGE)):
        built = _run("docker", "build", "-f", "docker/Dockerfile", "--build-arg", f"TORCH_INDEX={_torch_index()}",
                     "--target", target, "-t", tag, ".", timeout=1800)
        assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    print(f"images built in {time.perf_counter() - started:.0f} s")
    _check_the_server_image_has_no_torch()
    # Hex, never a leading '-': Neo4j's entrypoint would read such a password as an option.
    token = secrets.token_hex(24)
    admin = secrets.token_hex(24)
    env = {**os.environ, "GNNSTORE_IMAGE": IMAGE, "GNNSTORE_TOOLS_IMAGE": TOOLS_IMAGE,
           "GNNSTORE_NEO4J_PASSWORD": secrets.token_hex(12),
           "GNNSTORE_AUTH_TOKENS": f"{token} reader compose-test,{admin} admin compose-admin",
           "GNNSTORE_PUBLISH_PORT": str(free_port()), "GNNSTORE_PUBLISH_DATA_PORT": str(free_port()),
           "COMPOSE_PROJECT_NAME": PROJECT, "TEST_TOKEN": token, "TEST_ADMIN_TOKEN": admin}
    try:
        yield env
    finally:
        _run("docker", "compose", "--profile", "replicas", "down", "-v", "--timeout", "20", env=env, timeout=300)


def _check_the_server_image_has_no_torch() -> None:
    """The server image holds neither torch nor PyG, and stays within its size budget."""
    size = int(_run("docker", "image", "inspect", "-f", "{{.Size}}", IMAGE).stdout)
    tools = int(_run("docker", "image", "inspect", "-f", "{{.Size}}", TOOLS_IMAGE).stdout)
    print(f"server image {size / 2**30:.2f} GiB, tools image {tools / 2**30:.2f} GiB")
    assert size <= SERVER_IMAGE_LIMIT, f"the server image is {size / 2**30:.2f} GiB, over 1.5 GiB"
    probe = "import importlib.util as u; print([m for m in ('torch', 'torch_geometric') if u.find_spec(m)])"
    found = _run("docker", "run", "--rm", "--entrypoint", "python", IMAGE, "-c", probe, timeout=120)
    assert found.returncode == 0 and found.stdout.strip() == "[]", found.stdout + found.stderr[-2000:]


def _up(env: dict[str, str]) -> float:
    """`docker compose up -d --wait`; its seconds."""
    started = time.perf_counter()
    up = _run("docker", "compose", "up", "-d", "--wait", "--no-build", env=env, timeout=900)
    logs = _run("docker", "compose", "logs", "--no-color", env=env, timeout=120).stdout
    assert up.returncode == 0, up.stderr[-3000:] + logs[-5000:]
    print(up.stderr[-2000:])  # what compose did to each container (shown when a test fails)
    return time.perf_counter() - started


def _server_container(env: dict[str, str]) -> tuple[str, str]:
    """The gnnstore service's container id and start time (a restart changes the latter)."""
    (cid,) = _run("docker", "compose", "ps", "-q", "gnnstore", env=env).stdout.split()
    started = _run("docker", "inspect", "-f", "{{.State.StartedAt}}", cid).stdout.strip()
    return cid, started


def _train_a_few_batches(env: dict[str, str]) -> list[float]:
    """A host-side trainer over the published port, with the reader token: losses of 2 epochs."""
    fs, gs = connect(f"127.0.0.1:{env['GNNSTORE_PUBLISH_PORT']}", token=env["TEST_TOKEN"], timeout=60)
    y = fs.get_tensor(group_name=None, attr_name="y", index=None)
    train = torch.nonzero(fs.get_tensor(group_name=None, attr_name="train_mask", index=None)).flatten()
    x_width = fs.get_tensor_size(group_name=None, attr_name="x")[1]
    sampler = RemoteNeighborSampler(fs, [10, 5], feature_store=fs)
    loader = NodeLoader((fs, gs), node_sampler=sampler, input_nodes=train[:2048], batch_size=256, shuffle=True)
    torch.manual_seed(0)
    model = GraphSAGE(x_width, 32, 2, int(y.max()) + 1)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    losses = []
    for _ in range(2):
        total = 0.0
        for batch in loader:
            assert torch.equal(batch.y, y[batch.n_id])  # rows of the right nodes
            optimizer.zero_grad()
            loss = F.cross_entropy(model(batch.x, batch.edge_index)[: batch.batch_size], batch.y[: batch.batch_size])
            loss.backward()
            optimizer.step()
            total += loss.item()
        losses.append(total / len(loader))
    # Shared memory cannot cross into the container: every batch came through the published data port.
    assert fs.connection.use_data_port and fs.connection.data_port().fetched == 2 * len(loader)
    fs.connection.close()
    return losses


def test_compose_up_serves_a_trainer_and_replicas_and_up_again_is_safe(compose_env: dict[str, str]) -> None:
    env = compose_env
    first = _up(env)
    print(f"first `up --wait`: healthy in {first:.0f} s")
    losses = _train_a_few_batches(env)
    assert losses[-1] < losses[0], losses
    server = _server_container(env)

    again = _up(env)  # on the live stack: the ingest must not fight the server for /data's lock
    print(f"`up --wait` on the running stack: {again:.0f} s")
    ingest_logs = _run("docker", "compose", "logs", "--no-color", "ingest", env=env).stdout
    assert "nothing to do:" in ingest_logs, ingest_logs[-2000:]
    assert _server_container(env) == server  # the server kept running (compose's account: printed by _up)

    _replicas_serve_a_trainer_and_one_killed_mid_epoch_costs_no_batch(env)

    down = _run("docker", "compose", "--profile", "replicas", "down", "--timeout", "20", env=env,
                timeout=300)  # volumes kept
    assert down.returncode == 0, down.stderr
    after_down = _up(env)
    print(f"`up --wait` after `down` (volumes kept): {after_down:.0f} s")
    assert _train_a_few_batches(env)[-1] < losses[0]


def requests_made(address: str, method: str, token: str) -> int:
    """Calls of ``method`` the server at ``address`` has answered (its admin statistics)."""
    stats = server_stats(Connection(address, token=token)).get(method)
    return 0 if stats is None else stats.requests


def _epoch(addresses: list[str], env: dict[str, str], after_batch: Callable[[int], None] = lambda i: None) -> tuple:
    """One epoch's batches (n_id, edge_index, x) over ``addresses``, request seeds from 11, and
    the longest wait for a batch."""
    fs, gs = connect(addresses, token=env["TEST_TOKEN"], timeout=60, retry_timeout=60)
    sampler = RemoteNeighborSampler(fs, [10, 5], seed=11, feature_store=fs)
    loader = NodeLoader((fs, gs), node_sampler=sampler, input_nodes=torch.arange(3000), batch_size=250)
    batches, longest, last = [], 0.0, time.monotonic()
    for i, batch in enumerate(loader):
        longest = max(longest, time.monotonic() - last)
        batches.append((batch.n_id, batch.edge_index, batch.x))
        after_batch(i)
        last = time.monotonic()
    fs.connection.close()
    return batches, longest


def _digest(batch: tuple) -> str:
    """A batch's (n_id, edge_index, x) as one hash, to compare batches made in another process."""
    return hashlib.sha256(b"".join(t.numpy().tobytes() for t in batch)).hexdigest()


# A trainer inside the compose network: one name for every replica, as the compose DNS answers it.
_EPOCH_THROUGH_ONE_NAME = """
import hashlib, sys, torch
from torch_geometric.loader import NodeLoader
from gnnstore.client import RemoteNeighborSampler, connect
fs, gs = connect("dns:///replica:50051", token=sys.argv[1], timeout=60, retry_timeout=60)
sampler = RemoteNeighborSampler(fs, [10, 5], seed=11, feature_store=fs)
for batch in NodeLoader((fs, gs), node_sampler=sampler, input_nodes=torch.arange(3000), batch_size=250):
    print(hashlib.sha256(b"".join(t.numpy().tobytes() for t in (batch.n_id, batch.edge_index, batch.x))).hexdigest())
"""


def _replicas_serve_a_trainer_and_one_killed_mid_epoch_costs_no_batch(env: dict[str, str]) -> None:
    """Two replicas scaled up beside the primary: every server answers a share of an epoch, each
    batch is the primary's, and one replica killed mid-epoch costs no batch. (Part of the one
    compose test: two stacks at once would rebuild each other's image tag.)"""
    scaled = _run("docker", "compose", "--profile", "replicas", "up", "-d", "--wait", "--no-build",
                  "--scale", "replica=2", env=env, timeout=900)
    assert scaled.returncode == 0, scaled.stderr[-3000:]
    primary = f"127.0.0.1:{env['GNNSTORE_PUBLISH_PORT']}"
    replicas = [_run("docker", "compose", "port", "--index", str(i), "replica", "50051", env=env).stdout.strip()
                for i in (1, 2)]
    assert all(r.startswith("127.0.0.1:") for r in replicas), replicas
    reference, _ = _epoch([primary], env)
    servers = [primary, *replicas]
    for replica in replicas:  # SERVING, as health-checked balancing needs before it sends calls
        probe = Connection(replica, token=env["TEST_TOKEN"])
        assert probe.is_serving(timeout=30), replica
        probe.close()
    answered = [requests_made(s, SAMPLE, token=env["TEST_ADMIN_TOKEN"]) for s in servers]
    batches, _ = _epoch(servers, env)
    answered = [requests_made(s, SAMPLE, token=env["TEST_ADMIN_TOKEN"]) - a for s, a in zip(servers, answered)]
    assert all(answered), answered  # every server took a share
    before = [requests_made(r, SAMPLE, token=env["TEST_ADMIN_TOKEN"]) for r in replicas]
    for attempt in range(3):  # health-checked balancing skips a replica while it reports NOT_SERVING
        # A trainer inside the compose network: the tools image (the server's has no torch), as ingest runs it.
        inside = _run("docker", "compose", "--profile", "replicas", "run", "--rm", "--no-deps", "-T", "ingest",
                      "python", "-c", _EPOCH_THROUGH_ONE_NAME, env["TEST_TOKEN"], env=env, timeout=600)
        assert inside.returncode == 0, inside.stderr[-3000:]
        assert inside.stdout.split() == [_digest(b) for b in reference], "an epoch through dns:///replica differs"
        answered = [requests_made(r, SAMPLE, token=env["TEST_ADMIN_TOKEN"]) - a for r, a in zip(replicas, before)]
        print(f"epoch {attempt + 1} through dns:///replica: sample calls per replica so far {answered}")
        if all(answered):
            break
    assert all(answered), answered  # the one name reached every replica
    (victim, *_) = _run("docker", "compose", "ps", "-q", "replica", env=env).stdout.split()
    kills: list[subprocess.CompletedProcess] = []

    def kill_after_batch_3(i: int) -> None:
        if i == 3:
            kills.append(_run("docker", "kill", victim))

    killed, longest = _epoch(servers, env, after_batch=kill_after_batch_3)
    assert [k.returncode for k in kills] == [0], kills
    print(f"a replica killed mid-epoch: longest wait for a batch {longest:.2f} s")
    for got in (batches, killed):
        assert len(got) == len(reference)
        for i, (a, b) in enumerate(zip(got, reference)):
            assert all(torch.equal(x, y) for x, y in zip(a, b)), f"batch {i} differs from the primary's"
