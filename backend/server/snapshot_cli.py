"""``gnnstore snapshot``: what read-only servers read, made ahead of them."""
from __future__ import annotations

import os
from pathlib import Path

import click

from gnnstore.config import load_config


@click.group("snapshot")
def snapshot_command() -> None:
    """Prepare a data directory for servers that may not write it, or copy one while it is served."""


@snapshot_command.command("prepare")
@click.option("--config", "config_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="TOML file of server settings, as `gnnstore serve --config` reads it.")
@click.option("--data-dir", type=click.Path(path_type=Path), help="Data directory written by `gnnstore ingest`.")
def prepare_command(config_file: Path | None, data_dir: Path | None) -> None:
    """Build the topology snapshot and feature tier a server reads, then exit.

    A `gnnstore serve --read-only` over a read-only mount, or several replicas starting at once
    over one volume, then find them ready instead of building them. Settings come as for `serve`
    (--config, then GNNSTORE_* variables, then flags), so a Neo4j graph is read from the same
    URI. Prints one line: the snapshot and what it holds. Run it again after each ingest.
    """
    config = load_config(config_file, os.environ, {"data_dir": data_dir, "read_only": True})
    from gnnstore.backend.service.served_data import open_served_data

    data = open_served_data(config)
    try:
        summary = data.summary
        click.echo(
            f"prepared {config.data_dir} | {summary.sampling} {summary.snapshot_id} | "
            f"{sum(summary.num_nodes.values())} nodes | {sum(summary.num_edges.values())} edges"
        )
    finally:
        data.close()


@snapshot_command.command("create")
@click.option("--data-dir", type=click.Path(path_type=Path), required=True,
              help="Data directory to copy (a primary may be serving and writing it).")
@click.argument("out", type=click.Path(path_type=Path))
def create_command(data_dir: Path, out: Path) -> None:
    """Copy the newest version of a data directory to OUT, a new directory, while it is served.

    For servers on hosts that share no filesystem with the primary: `gnnstore serve --data-dir OUT`
    serves exactly that version. The copy reads the directory as a replica does and never writes
    it. Prints one line: the graph version and the feature store version copied.
    """
    from gnnstore.backend.server.snapshot_copy import copy_newest_version

    copied = copy_newest_version(data_dir, out)
    click.echo(f"copied graph version {copied.graph_version} (feature store {copied.feature_version}) "
               f"of {data_dir} to {out}")
