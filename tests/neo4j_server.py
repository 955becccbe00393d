"""A real Neo4j 5.26 for the suite: a pytest plugin providing the session fixture ``neo4j_server``.

Two ways to run it: ``docker/neo4j/Launcher.java`` starts the embedded server from the jars
``scripts/fetch_neo4j.sh`` caches, on a free port of 127.0.0.1 with a temporary data folder and
auth off ("local"); or testcontainers' ``Neo4jContainer("neo4j:5.26")`` where a Docker daemon
answers ("docker"). ``$GNNSTORE_TEST_NEO4J`` picks one first (``local`` or ``docker``); unset,
local goes first where ``java`` is on PATH, since a daemon may answer yet be unable to pull
images (an offline CI). When the first way cannot start Neo4j the other is tried. Ryuk (the
reaper image testcontainers pulls) is off: the fixture stops its container itself. Neo4j
starts once per session and only when a test asks for it. Under ``CI=true`` a Neo4j test is
never skipped: if neither way works the fixture fails with both reasons.

Use it from any conftest with ``from neo4j_server import neo4j_server  # noqa: F401`` (``tests/``
is on ``sys.path``), or as a plugin with ``-p neo4j_server``; ``wipe(uri, auth)`` empties the
database before a test writes its graph.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gnnstore.backend.server.server_process import free_port

ROOT = Path(__file__).resolve().parents[1]
LAUNCHER = ROOT / "docker" / "neo4j" / "Launcher.java"
FETCH = ROOT / "scripts" / "fetch_neo4j.sh"
IMAGE = "neo4j:5.26"
# Without these opens Neo4j 5.26 on Java 17 still starts, but falls back to slow paths and
# logs warnings: java.nio (DirectByteBuffer for the page cache), sun.nio.ch and java.io (the
# file descriptors behind transaction-log preallocation and fadvise).
ADD_OPENS = ("java.base/java.nio", "java.base/sun.nio.ch", "java.base/java.io")
START_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 60.0

Auth = tuple[str, str] | None


def in_ci() -> bool:
    """Whether the suite runs in CI, where a Neo4j test may never be skipped."""
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def docker_available() -> bool:
    """Whether a Docker daemon answers a ping (about 0.1 s when none runs)."""
    try:
        import docker

        docker.from_env(timeout=3).ping()
    except Exception:  # noqa: BLE001 - any failure means "no usable daemon"
        return False
    return True


def neo4j_lib() -> Path:
    """The cached Neo4j jar folder, fetched through ``scripts/fetch_neo4j.sh`` when missing."""
    result = subprocess.run([str(FETCH)], capture_output=True, text=True, check=False)
    lines = result.stdout.strip().splitlines()
    lib = Path(lines[-1]) if lines else None
    if result.returncode != 0 or lib is None or not lib.is_dir():
        raise RuntimeError(
            f"{FETCH} gave no Neo4j jars (exit {result.returncode}): {result.stderr.strip()[-2000:]}"
        )
    return lib


def wait_for_bolt(uri: str, auth: Auth, deadline: float, alive: Callable[[], bool]) -> None:
    """Poll ``verify_connectivity`` until Bolt answers, ``alive()`` turns false or time runs out."""
    from neo4j import GraphDatabase

    with GraphDatabase.driver(uri, auth=auth) as driver:
        while True:
            if not alive():
                raise RuntimeError(f"Neo4j exited before Bolt answered on {uri}")
            try:
                driver.verify_connectivity()
                return
            except Exception as exc:  # noqa: BLE001 - not up yet: retry until the deadline
                if time.monotonic() > deadline:
                    raise RuntimeError(f"Bolt did not answer on {uri} within the timeout") from exc
                time.sleep(0.5)


class LocalNeo4j:
    """The embedded Neo4j launcher as a child process: ``start()``, ``uri``, ``stop()``.

    Args:
        home: the data folder (databases, transaction logs, ``logs/debug.log``).
        port: the Bolt port on 127.0.0.1 (default: a free one).
        heap_mb: the JVM heap (small: the machines are shared with the test suite).
        pagecache_mb: Neo4j's page cache.
    """

    def __init__(
        self, home: Path, port: int | None = None, *, heap_mb: int = 768, pagecache_mb: int = 256
    ) -> None:
        self.home = Path(home)
        self.port = port or free_port()
        self.heap_mb, self.pagecache_mb = heap_mb, pagecache_mb
        self.uri = f"bolt://127.0.0.1:{self.port}"
        self.log_path = self.home / "launcher.log"
        self.proc: subprocess.Popen | None = None
        self.startup_s = 0.0

    def command(self, lib: Path) -> list[str]:
        """The java command line that starts the launcher in source-file mode."""
        java = shutil.which("java")
        if java is None:
            raise RuntimeError("java not found on PATH: Neo4j 5.26 needs Java 17 or 21")
        opens = [f"--add-opens={module}=ALL-UNNAMED" for module in ADD_OPENS]
        return [
            java, f"-Xms{self.heap_mb // 2}m", f"-Xmx{self.heap_mb}m", *opens,
            "-cp", f"{lib}/*", str(LAUNCHER), str(self.port), str(self.home), str(self.pagecache_mb),
        ]  # fmt: skip

    def admin(self, args: list[str], lib: Path | None = None) -> str:
        """Run ``neo4j-admin ARGS`` over this (stopped) home from the same jars; its output.

        Raises:
            RuntimeError: it failed (the message holds its output's end).
        """
        conf = self.home / "conf"
        conf.mkdir(parents=True, exist_ok=True)
        (conf / "neo4j.conf").touch()
        result = subprocess.run(
            [shutil.which("java") or "java", f"-Xmx{self.heap_mb}m", "-cp", f"{lib or neo4j_lib()}/*",
             "org.neo4j.cli.AdminTool", *args],
            capture_output=True, text=True, env={**os.environ, "NEO4J_HOME": str(self.home), "NEO4J_CONF": str(conf)},
        )
        if result.returncode != 0:
            raise RuntimeError(f"neo4j-admin {' '.join(args[:3])} failed:\n{(result.stdout + result.stderr)[-3000:]}")
        return result.stdout

    def start(self, lib: Path | None = None) -> "LocalNeo4j":
        """Start the JVM and return once Bolt answers; on failure stop it and raise with the log."""
        cmd = self.command(lib or neo4j_lib())
        self.home.mkdir(parents=True, exist_ok=True)
        began = time.monotonic()
        with open(self.log_path, "wb") as log:  # a file, never a PIPE nobody drains
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_for_bolt(self.uri, None, began + START_TIMEOUT_S, self.alive)
        except Exception as exc:
            self.stop()
            raise RuntimeError(f"{exc}\n{self.log_tail()}") from exc
        self.startup_s = time.monotonic() - began
        return self

    def alive(self) -> bool:
        """Whether the launcher process still runs."""
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        """SIGTERM (a clean shutdown), then SIGKILL after ``STOP_TIMEOUT_S``."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def log_tail(self, lines: int = 40) -> str:
        """The last lines of the launcher's output and of Neo4j's debug log."""
        parts = []
        for path in (self.log_path, self.home / "logs" / "debug.log"):
            if path.is_file():
                tail = path.read_text(errors="replace").splitlines()[-lines:]
                parts.append(f"--- {path} (last {len(tail)} lines)\n" + "\n".join(tail))
        return "\n".join(parts) or f"(no log under {self.home})"


def wipe(uri: str, auth: Auth) -> None:
    """Delete every node and relationship, and every constraint and index gnnstore did not make.

    gnnstore's own (``gnnstore_*``: unique ids, eid indexes) stay: they are created
    ``IF NOT EXISTS``, constrain nothing on an empty database, and cost a second each to rebuild.
    """
    from neo4j import GraphDatabase

    with GraphDatabase.driver(uri, auth=auth) as driver:
        with driver.session() as session:  # CALL ... IN TRANSACTIONS needs an implicit transaction
            session.run("MATCH (n) CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF 10000 ROWS").consume()
        for record in driver.execute_query("SHOW CONSTRAINTS YIELD name").records:
            if not record["name"].startswith("gnnstore_"):
                driver.execute_query(f"DROP CONSTRAINT `{record['name']}` IF EXISTS")
        indexes = driver.execute_query("SHOW INDEXES YIELD name, type, owningConstraint").records
        for record in indexes:
            name = record["name"]
            ours = name.startswith("gnnstore_") or record["owningConstraint"]
            if record["type"] != "LOOKUP" and not ours:
                driver.execute_query(f"DROP INDEX `{name}` IF EXISTS")


def _unavailable(reason: str) -> None:
    """Fail under CI (a Neo4j test is never skipped there); skip elsewhere."""
    if in_ci():
        pytest.fail(f"Neo4j is required in CI and could not be started: {reason}", pytrace=False)
    pytest.skip(f"no Neo4j: {reason}")


def ways_to_start() -> list[str]:
    """``"local"`` and ``"docker"`` in the order the fixture tries them (see the module doc).

    Raises:
        ValueError: ``$GNNSTORE_TEST_NEO4J`` is neither ``local`` nor ``docker``.
    """
    first = os.environ.get("GNNSTORE_TEST_NEO4J") or ("local" if shutil.which("java") else "docker")
    if first not in ("local", "docker"):
        raise ValueError(f"GNNSTORE_TEST_NEO4J must be 'local' or 'docker', got {first!r}")
    return [first, "docker" if first == "local" else "local"]


@contextlib.contextmanager
def _local(home: Path) -> Iterator[tuple[str, Auth]]:
    if shutil.which("java") is None:
        raise RuntimeError("java is not on PATH")
    server = LocalNeo4j(home).start()  # raises with the log tail
    try:
        yield server.uri, None
    finally:
        server.stop()


@contextlib.contextmanager
def _docker() -> Iterator[tuple[str, Auth]]:
    if not docker_available():
        raise RuntimeError("no Docker daemon answers")
    os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")
    from testcontainers.community.neo4j import Neo4jContainer

    with Neo4jContainer(IMAGE, password="gnnstore-test") as container:
        yield container.get_connection_url(), ("neo4j", "gnnstore-test")


@pytest.fixture(scope="session")
def neo4j_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Auth]]:
    """``(uri, auth)`` of a Neo4j 5.26 started once per session (auth is ``None`` when local)."""
    failures = []
    for way in ways_to_start():
        with contextlib.ExitStack() as stack:
            try:
                started = _local(tmp_path_factory.mktemp("neo4j")) if way == "local" else _docker()
                address = stack.enter_context(started)
            except Exception as exc:  # noqa: BLE001 - the other way is tried, then both reasons told
                failures.append(f"{way}: {exc}")
                continue
            yield address
            return
    _unavailable("; ".join(failures))
