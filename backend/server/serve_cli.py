"""``gnnstore serve``: run the gRPC server over a data directory until SIGTERM or Ctrl-C."""
from __future__ import annotations

import faulthandler
import os
import signal
from pathlib import Path

import click

from gnnstore.config import GRAPH_BACKENDS, NEO4J_SAMPLING_MODES, ServerConfig, load_config

_DEFAULTS = ServerConfig()


@click.command("serve")
@click.option("--config", "config_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="TOML file of server settings (same names as the flags, with underscores).")
@click.option("--data-dir", type=click.Path(path_type=Path),
              help=f"Data directory written by `gnnstore ingest`.  [default: {_DEFAULTS.data_dir}]")
@click.option("--host", help=f"Interface to bind.  [default: {_DEFAULTS.host}]")
@click.option("--port", type=int, help=f"Port to bind; 0 picks a free one.  [default: {_DEFAULTS.port}]")
@click.option("--graph-backend", type=click.Choice(GRAPH_BACKENDS),
              help=f"Where the graph lives.  [default: {_DEFAULTS.graph_backend}]")
@click.option("--neo4j-uri", help=f"Bolt URI of Neo4j.  [default: {_DEFAULTS.neo4j_uri}]")
@click.option("--neo4j-user",
              help=f"Neo4j user (password: $GNNSTORE_NEO4J_PASSWORD).  [default: {_DEFAULTS.neo4j_user}]")
@click.option("--neo4j-sampling", type=click.Choice(NEO4J_SAMPLING_MODES),
              help=f"Sample Neo4j from a snapshot or live.  [default: {_DEFAULTS.neo4j_sampling}]")
@click.option("--read-only/--read-write", default=None,
              help="Open the stores read-only (Put/Remove refused).  [default: read-write]")
@click.option("--replica", is_flag=True, default=None,
              help="Serve the data directory beside the primary that writes it, following its writes "
                   "(writes refused here).")
@click.option("--max-lag-s", type=float,
              help="A replica reports NOT_SERVING while it trails the primary by more than this.  "
                   f"[default: {_DEFAULTS.max_lag_s}]")
@click.option("--max-message-bytes", type=int,
              help=f"Message size limit (>= 256 MiB).  [default: {_DEFAULTS.max_message_bytes}]")
@click.option("--workers", type=int, help=f"Threads answering calls.  [default: {_DEFAULTS.workers}]")
@click.option("--sampling-threads", type=int,
              help="Threads one client's sampling may use; the server keeps one more for the others "
                   "(0: half the CPUs).  [default: 0]")
@click.option("--max-concurrent-rpcs", type=int,
              help=f"Calls admitted at once.  [default: {_DEFAULTS.max_concurrent_rpcs}]")
@click.option("--max-sample-edges", type=int,
              help=f"Most edges one sampling request may cause.  [default: {_DEFAULTS.max_sample_edges}]")
@click.option("--bulk-sample-edges", type=int,
              help="Requests that may sample more edges run as bulk work, on threads of their own at a lower "
                   f"CPU priority.  [default: {_DEFAULTS.bulk_sample_edges}]")
@click.option("--max-reply-bytes", type=int,
              help=f"Most feature bytes one reply may gather.  [default: {_DEFAULTS.max_reply_bytes}]")
@click.option("--resident-feature-bytes", type=int,
              help="Hold the feature arrays in memory when they fit in this many bytes, else map them "
                   "from their files (0: always map; held to half of this machine's memory).  "
                   "[default: a quarter of this machine's memory]")
@click.option("--max-put-rows", type=int, help=f"Most rows one Put may write.  [default: {_DEFAULTS.max_put_rows}]")
@click.option("--shutdown-grace-s", type=float,
              help=f"Seconds in-flight calls get on shutdown.  [default: {_DEFAULTS.shutdown_grace_s}]")
@click.option("--max-connection-age-s", type=float,
              help="Close each client connection after this many seconds, so a new replica behind the same "
                   "name receives calls (0: never).  [default: 0]")
@click.option("--stream-stall-s", type=float,
              help="Seconds a streamed reply may wait for its client to read before it is cancelled.  "
                   f"[default: {_DEFAULTS.stream_stall_s}]")
@click.option("--auth-file", type=click.Path(dir_okay=False, path_type=Path),
              help="File of 'TOKEN ROLE [NAME]' lines (roles: reader, writer, admin); every call then "
                   "needs a token. More entries: $GNNSTORE_AUTH_TOKENS. Re-read on SIGHUP.")
@click.option("--insecure", is_flag=True, default=None,
              help="Allow a non-loopback --host without tokens (anyone reaching the port may read and write).")
@click.option("--tls-cert", type=click.Path(dir_okay=False, path_type=Path),
              help="PEM certificate chain of the server: TLS on (with --tls-key).")
@click.option("--tls-key", type=click.Path(dir_okay=False, path_type=Path), help="PEM private key of --tls-cert.")
@click.option("--tls-client-ca", type=click.Path(dir_okay=False, path_type=Path),
              help="PEM CA: clients must present a certificate it signed (mutual TLS).")
@click.option("--metrics-port", type=int,
              help="Serve Prometheus metrics on this port at /metrics (0: a free one).  [default: off]")
@click.option("--metrics-host",
              help=f"Interface of the metrics endpoint (no authentication).  [default: {_DEFAULTS.metrics_host}]")
@click.option("--serve-data-port/--no-serve-data-port", default=None,
              help="Send large sampling replies through the data port instead of gRPC.  [default: on]")
@click.option("--data-port", type=int,
              help="The data port on --host (0: a free one, which the log names).  [default: 0]")
@click.option("--data-public-port", type=int,
              help="The data port as clients reach it, where a port mapping renumbers it.  "
                   "[default: the bound one]")
def serve_command(config_file: Path | None, **flags: object) -> None:
    """Serve a data directory over gRPC (FeatureService, GraphService, IdMapService, AdminService).

    Settings come from --config, then GNNSTORE_* variables (e.g. GNNSTORE_PORT), then flags.
    Prints one line with the bound address and the schema, then serves until SIGTERM/Ctrl-C.
    SIGHUP re-reads the auth file; SIGUSR1 writes every thread's stack to stderr.
    Without tokens the server binds only a loopback --host; tokens never come from flags.
    """
    config = load_config(config_file, os.environ, flags)
    from gnnstore.backend.server.server import serve  # here, not above: `--help` stays quick

    # Until the process ends, exit included: where a stuck server is stuck, without a debugger.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    serve(config, _announce)


def _announce(line: str) -> None:
    """Print the start-up line and flush: a parent may be reading our stdout through a pipe."""
    click.echo(line)
    click.get_text_stream("stdout").flush()
