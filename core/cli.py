"""The ``gnnstore`` command line: its table of commands is the table of contents.

Each command's module is imported only when that command runs (or shows its own help), so
``gnnstore --help`` and ``gnnstore version`` answer at once, without loading torch or PyG.
"""
from __future__ import annotations

import importlib
import logging
import sys
import warnings

import click

from gnnstore import __version__
from gnnstore.common.errors import CommandInputError, GnnStoreError

TRAIN_MODULES = ("torch", "torch_geometric", "matplotlib")
"""What the `train` extra installs: the trainer's side, ingest and the demo need it; `serve` does not."""

COMMANDS = {  # name -> (module:attribute, the one line `gnnstore --help` shows)
    "ingest": ("gnnstore.ingest.cli:ingest_command", "Load a graph into the stores."),
    "attach": ("gnnstore.ingest.cli:attach_command", "Serve a graph kept in another database, in its own schema."),
    "neo4j-adopt": ("gnnstore.ingest.cli:adopt_command", "Make a graph imported by neo4j-admin a gnnstore graph."),
    "migrate": ("gnnstore.ingest.cli:migrate_command", "Convert a data directory's graph to another engine."),
    "serve": ("gnnstore.backend.server.serve_cli:serve_command", "Serve a data directory over gRPC."),
    "snapshot": ("gnnstore.backend.server.snapshot_cli:snapshot_command",
                 "Prepare a data directory for servers that may not write it."),
    "demo": ("gnnstore.demo_command:demo_command", "Generate, ingest, serve and train GraphSAGE, end to end."),
}


class LazyGroup(click.Group):
    """A group whose commands (but ``version``) are imported when they are used."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*COMMANDS, *self.commands])

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.commands or name not in COMMANDS:
            return self.commands.get(name)
        module, attribute = COMMANDS[name][0].split(":")
        return getattr(importlib.import_module(module), attribute)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][1] if name in COMMANDS else self.commands[name].get_short_help_str())
                for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup)
@click.option("-v", "--verbose", is_flag=True, help="Log at DEBUG level.")
def cli(verbose: bool) -> None:
    """gnnstore: train PyG models on graphs that live in databases."""
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


@cli.command("version")
def version_command() -> None:
    """Print gnnstore's version."""
    click.echo(__version__)


def main() -> None:
    """Entry point: one line for gnnstore's own errors, a traceback for anything else.

    Exit status 2: bad usage (an unknown command or option, a bad option value, a config file or
    data directory that cannot be used); 1: the command failed; 130: interrupted.
    """
    # PyG's import decorates with torch.jit.script, which torch 2.9+ deprecates: a warning about
    # torch's internals that no gnnstore user can act on.
    warnings.filterwarnings("ignore", message=r"`torch\.jit\.script` is deprecated", category=FutureWarning)
    try:
        cli(standalone_mode=False)
    except click.exceptions.Abort:
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except GnnStoreError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2 if isinstance(exc, CommandInputError) else 1)
    except ModuleNotFoundError as exc:
        if exc.name not in TRAIN_MODULES:
            raise
        click.echo(f"error: this command needs {exc.name}, which a server install leaves out: "
                   "pip install 'gnnstore[train]' (or use the gnnstore-tools image)", err=True)
        sys.exit(2)
