"""The ``gnnstore`` command line: its ``add_command`` lines are the table of contents."""
from __future__ import annotations

import logging
import sys

import click

from gnnstore import __version__
from gnnstore.backend.server.serve_cli import serve_command
from gnnstore.common.errors import GnnStoreError
from gnnstore.demo import demo_command
from gnnstore.ingest.cli import adopt_command, attach_command, ingest_command


@click.group()
@click.option("-v", "--verbose", is_flag=True, help="Log at DEBUG level.")
def cli(verbose: bool) -> None:
    """gnnstore: train PyG models on graphs that live in databases."""
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


@click.command("version")
def version_command() -> None:
    """Print gnnstore's version."""
    click.echo(__version__)


cli.add_command(version_command)
cli.add_command(ingest_command)
cli.add_command(adopt_command)
cli.add_command(attach_command)
cli.add_command(serve_command)
cli.add_command(demo_command)


def main() -> None:
    """Entry point: one line and exit 1 for gnnstore's own errors, a traceback for anything else."""
    try:
        cli(standalone_mode=False)
    except click.exceptions.Abort:
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except GnnStoreError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
