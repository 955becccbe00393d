"""gnnstore's configuration (serve, and ingest's graph target): a TOML file, then ``GNNSTORE_*``, then flags.

Each field has one name everywhere: ``port`` in the TOML file, ``GNNSTORE_PORT`` in the
environment, ``--port`` on the command line; later sources override earlier ones. Unknown keys
in the file are errors. Secrets (the Neo4j password) come only from the environment.
"""
from __future__ import annotations

import dataclasses
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from gnnstore.common.errors import CommandInputError, InvalidRequestError
from gnnstore.proto.limits import DEFAULT_MAX_MESSAGE_BYTES, MIN_MAX_MESSAGE_BYTES

ENV_PREFIX = "GNNSTORE_"
SECRETS = frozenset({"neo4j_password", "auth_tokens"})
EMBEDDED_ENGINES = ("ladybug", "kuzu")  # the engines of gnnstore.stores.graph_engines, by name
GRAPH_BACKENDS = ("embedded", *EMBEDDED_ENGINES, "neo4j")
"""``embedded``: the data directory's own graph (LadybugDB for a new one); ``ladybug`` and ``kuzu``:
that embedded engine, the one a directory must have been made with; ``neo4j``: a Neo4j server."""
NEO4J_SAMPLING_MODES = ("snapshot", "live")
_TRUE, _FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off"}


@dataclass(frozen=True)
class ServerConfig:
    """Everything ``gnnstore serve`` needs.

    Attributes:
        data_dir: the data directory ``gnnstore ingest`` wrote (graph, features, id map).
        host: interface to bind; 127.0.0.1 keeps the server local.
        port: port to bind; 0 picks a free one (the start-up line reports it).
        graph_backend: one of ``GRAPH_BACKENDS``: the graph in ``data_dir`` (``embedded``: whichever
            engine made it; ``ladybug``, ``kuzu``: that one), or in ``neo4j``.
        neo4j_uri, neo4j_user: where Neo4j runs and who logs in.
        neo4j_password: only from ``GNNSTORE_NEO4J_PASSWORD``.
        neo4j_sampling: ``snapshot`` (sample a memory-mapped copy) or ``live`` (query Neo4j).
        read_only: open the stores read-only (Put and Remove are refused; other readers may
            open the same data directory).
        replica: serve the data directory beside the primary that writes it (a ``gnnstore serve``
            without ``replica``), read-only, following its writes: every write the primary
            acknowledged is served here within ``max_lag_s``.
        max_lag_s: a replica reports NOT_SERVING (health) while its data trails the primary's
            by more than this many seconds; it catches up every quarter of it.
        max_message_bytes: send and receive limit per message (at least 256 MiB).
        workers: threads answering calls.
        sampling_threads: threads that one client's sampling calls may use at once (sampling and
            gathering rows); 0 (the default) is half the CPUs this process may run on, at least
            one (more only take cores from a trainer on the same host). The server runs one
            more, and gives threads to clients in turn, so one client cannot starve the others.
        max_concurrent_rpcs: calls admitted at once; more are refused with RESOURCE_EXHAUSTED.
        shutdown_grace_s: how long in-flight calls may run after SIGTERM/SIGINT.
        max_connection_age_s: close each client connection after this many seconds (0, the
            default: never), letting its calls finish within ``shutdown_grace_s``; the client
            connects again at once, so with several servers behind one name (replicas) a new or
            restarted one receives calls within this time.
        stream_stall_s: how long a streamed reply (GetTensor, GetEdgeIndex) may wait for its
            client to take a message before it is cancelled; at most half the ``workers`` send
            streamed replies at once, so callers that stop reading cannot hold every thread.
        max_seeds, max_hops, max_fanout: limits of one sampling request.
        max_sample_edges: the most edges one sampling request may cause, bounded from seeds,
            fanouts and the graph's degrees before sampling.
        bulk_sample_edges: requests whose bound passes this are bulk work: they run on threads
            of their own at a lower CPU priority, so ordinary batches beside them get a core
            first (a batch of 1024 seeds with fanouts [25, 10] is bounded by 282k edges).
        max_reply_bytes: the most feature bytes one reply may gather (also MultiGet's).
        resident_feature_bytes: the feature tier's arrays are held in memory when they fit in
            this many bytes together (rows read at random go faster than through file maps),
            else served memory-mapped; 0 always maps them. ``None`` (the default): a quarter
            of the memory this process may use (the machine's, or its cgroup's limit); a
            larger value is held to half of it, with a warning.
        max_put_rows: the most rows one Put may write.
        auth_file: a file of ``token role [name]`` lines (roles: reader, writer, admin); every
            call but the health check then needs a token (reloaded on SIGHUP).
        auth_tokens: the same entries, comma-separated, only from ``GNNSTORE_AUTH_TOKENS``.
        insecure: allow a non-loopback bind without tokens (an open port; logged as a warning).
        tls_cert, tls_key: the server's PEM certificate chain and private key: TLS on.
        tls_client_ca: a PEM CA; clients must then present a certificate it signed (mutual TLS).
        metrics_port: serve Prometheus metrics at ``http://metrics_host:metrics_port/metrics``
            (``None``: no endpoint; 0 picks a free port, which the log names).
        metrics_host: the metrics endpoint's interface; it has no authentication, so a
            non-loopback one is logged as a warning.
        serve_data_port: send large sampling replies through the data port (a plain or TLS socket
            next to the gRPC port, read with a one-use ticket) instead of through gRPC.
        data_port: the data port on ``host`` (0 picks a free one, which the log names).
        data_public_port: the data port as clients reach it, where a port mapping (Docker)
            publishes it under another number; default the bound one.
    """

    data_dir: Path = Path("gnnstore-data")
    host: str = "127.0.0.1"
    port: int = 50051
    graph_backend: str = "embedded"
    neo4j_uri: str = "bolt://127.0.0.1:7687"
    neo4j_user: str = "neo4j"
    neo4j_password: str | None = dataclasses.field(default=None, repr=False)
    neo4j_sampling: str = "snapshot"
    read_only: bool = False
    replica: bool = False
    max_lag_s: float = 2.0
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    workers: int = 8
    sampling_threads: int = 0
    max_concurrent_rpcs: int = 64
    shutdown_grace_s: float = 10.0
    max_connection_age_s: float = 0.0
    stream_stall_s: float = 30.0
    max_seeds: int = 1 << 20
    max_hops: int = 8
    max_fanout: int = 10_000
    max_sample_edges: int = 50_000_000
    bulk_sample_edges: int = 4_000_000
    max_reply_bytes: int = 1 << 30
    resident_feature_bytes: int | None = None
    max_put_rows: int = 1 << 24
    auth_file: Path | None = None
    auth_tokens: str | None = dataclasses.field(default=None, repr=False)
    insecure: bool = False
    tls_cert: Path | None = None
    tls_key: Path | None = None
    tls_client_ca: Path | None = None
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"
    serve_data_port: bool = True
    data_port: int = 0
    data_public_port: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "data_dir", Path(self.data_dir))
        checks = [
            (bool(self.host), "host must not be empty"),
            (0 <= self.port <= 65535, f"port must be in 0..65535, got {self.port}"),
            (
                self.graph_backend in GRAPH_BACKENDS,
                f"graph_backend must be one of {GRAPH_BACKENDS}, got {self.graph_backend!r}",
            ),
            (
                self.neo4j_sampling in NEO4J_SAMPLING_MODES,
                f"neo4j_sampling must be one of {NEO4J_SAMPLING_MODES}, got {self.neo4j_sampling!r}",
            ),
            (
                self.max_message_bytes >= MIN_MAX_MESSAGE_BYTES,
                f"max_message_bytes must be at least {MIN_MAX_MESSAGE_BYTES} (256 MiB), "
                f"got {self.max_message_bytes}",
            ),
            (0.2 <= self.max_lag_s <= 3600, f"max_lag_s must be 0.2 to 3600 seconds, got {self.max_lag_s}"),
            (
                not (self.replica and self.graph_backend == "neo4j" and self.neo4j_sampling == "live"),
                "replica needs a snapshot to follow; a server sampling Neo4j live reads it as it is already",
            ),
            (self.workers >= 1, f"workers must be >= 1, got {self.workers}"),
            (self.sampling_threads >= 0, f"sampling_threads must be >= 0, got {self.sampling_threads}"),
            (
                self.max_concurrent_rpcs >= 1,
                f"max_concurrent_rpcs must be >= 1, got {self.max_concurrent_rpcs}",
            ),
            (self.shutdown_grace_s >= 0, f"shutdown_grace_s must be >= 0, got {self.shutdown_grace_s}"),
            (
                self.max_connection_age_s == 0 or 1 <= self.max_connection_age_s <= 365 * 86400,
                f"max_connection_age_s must be 0 (never) or 1 to 31536000 seconds, got {self.max_connection_age_s}",
            ),
            (self.stream_stall_s > 0, f"stream_stall_s must be > 0, got {self.stream_stall_s}"),
            (self.max_seeds >= 1, f"max_seeds must be >= 1, got {self.max_seeds}"),
            (self.max_hops >= 1, f"max_hops must be >= 1, got {self.max_hops}"),
            (self.max_fanout >= 1, f"max_fanout must be >= 1, got {self.max_fanout}"),
            (self.max_sample_edges >= 1, f"max_sample_edges must be >= 1, got {self.max_sample_edges}"),
            (self.bulk_sample_edges >= 0, f"bulk_sample_edges must be >= 0, got {self.bulk_sample_edges}"),
            (self.max_reply_bytes >= 1, f"max_reply_bytes must be >= 1, got {self.max_reply_bytes}"),
            (self.max_put_rows >= 1, f"max_put_rows must be >= 1, got {self.max_put_rows}"),
            (
                self.resident_feature_bytes is None or self.resident_feature_bytes >= 0,
                f"resident_feature_bytes must be >= 0, got {self.resident_feature_bytes}",
            ),
            (
                (self.tls_cert is None) == (self.tls_key is None),
                "tls_cert and tls_key come together (the certificate chain and its private key)",
            ),
            (
                self.tls_client_ca is None or self.tls_cert is not None,
                "tls_client_ca (mutual TLS) needs tls_cert and tls_key too",
            ),
            (
                self.metrics_port is None or 0 <= self.metrics_port <= 65535,
                f"metrics_port must be in 0..65535, got {self.metrics_port}",
            ),
            (bool(self.metrics_host), "metrics_host must not be empty"),
            (0 <= self.data_port <= 65535, f"data_port must be in 0..65535, got {self.data_port}"),
            (
                self.data_public_port is None or 1 <= self.data_public_port <= 65535,
                f"data_public_port must be in 1..65535, got {self.data_public_port}",
            ),
        ]
        for ok, message in checks:
            if not ok:
                raise InvalidRequestError(f"server config: {message}")

    @property
    def address(self) -> str:
        """``host:port`` as configured (port 0 until bound)."""
        return f"{self.host}:{self.port}"


_FIELDS = {f.name: f for f in fields(ServerConfig)}


def load_config(
    path: Path | None = None,
    environ: Mapping[str, str] | None = None,
    flags: Mapping[str, Any] | None = None,
) -> ServerConfig:
    """Read the TOML file, then ``GNNSTORE_*`` variables, then flags (``None`` values are unset).

    Args:
        path: a TOML file of top-level ``key = value`` pairs, or ``None``.
        environ: the environment to read (pass ``os.environ``); unrelated variables are ignored.
        flags: command-line values by field name.

    Raises:
        CommandInputError: the file is missing, unreadable or not TOML (the message names file,
            line and column), or has an unknown key or a secret.
        InvalidRequestError: an unknown flag, a secret in the flags, or a bad value.
    """
    values: dict[str, Any] = {}
    if path is not None:
        values.update(_read_toml(Path(path)))
    for name in _FIELDS:
        raw = (environ or {}).get(ENV_PREFIX + name.upper())
        if raw is not None:
            values[name] = _parse(name, raw, ENV_PREFIX + name.upper())
    for name, value in (flags or {}).items():
        if value is None:
            continue
        if name not in _FIELDS:
            raise InvalidRequestError(f"unknown server option {name!r} (known: {sorted(_FIELDS)})")
        if name in SECRETS:
            raise InvalidRequestError(f"{name} comes only from ${ENV_PREFIX}{name.upper()}")
        values[name] = _parse(name, value, f"--{name.replace('_', '-')}")
    return ServerConfig(**values)


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise CommandInputError(f"config file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise CommandInputError(f"config file {path} cannot be read: {reason}") from None
    except tomllib.TOMLDecodeError as exc:
        raise CommandInputError(f"config file {path} is not TOML: {exc}") from None
    values = {}
    for key, value in data.items():
        if key not in _FIELDS:
            raise CommandInputError(
                f"config file {path}: unknown key {key!r} (known: {sorted(_FIELDS)})"
            )
        if key in SECRETS:
            raise CommandInputError(
                f"config file {path}: {key} must not be written in a file; set "
                f"${ENV_PREFIX}{key.upper()} instead"
            )
        values[key] = _parse(key, value, f"{path}: {key}")
    return values


def _parse(name: str, value: Any, source: str) -> Any:
    """Coerce one value to the field's type, naming its source when it does not fit."""
    kind = _FIELDS[name].type
    try:
        if kind == "bool":
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text in _TRUE | _FALSE:
                return text in _TRUE
            raise ValueError("not a boolean")
        if kind in ("int", "int | None"):
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError("not an integer")
            return int(value)
        if kind == "float":
            return float(value)
        if kind in ("Path", "Path | None"):
            return Path(value)
        return str(value)
    except (TypeError, ValueError):
        raise InvalidRequestError(f"{source}: {value!r} is not a valid {kind} for {name}") from None


def embedded_engine(graph_backend: str) -> str | None:
    """The embedded engine ``graph_backend`` names (``None``: the directory's own, or none)."""
    return graph_backend if graph_backend in ("ladybug", "kuzu") else None
