"""The ``gnnstore`` root: its help and version answer without loading torch or PyG, and every
command it lists is there."""
from __future__ import annotations

import subprocess
import sys

import click
import pytest

from gnnstore.cli import COMMANDS, cli


@pytest.mark.parametrize("args", [["--help"], ["version"]])
def test_help_and_version_load_neither_torch_nor_pyg(args: list[str]) -> None:
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "gnnstore", *args], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    loaded = {line.split("|")[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    assert not {"torch", "torch_geometric"} & loaded, "the CLI root imported torch or PyG"
    assert "Warning" not in done.stderr
    if args == ["--help"]:
        assert all(name in done.stdout for name in COMMANDS)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_listed_command_is_the_command_of_that_name(name: str) -> None:
    command = cli.get_command(click.Context(cli), name)
    assert isinstance(command, click.Command) and command.name == name


def test_an_unknown_command_is_named_with_exit_2() -> None:
    done = subprocess.run([sys.executable, "-m", "gnnstore", "nosuch"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "No such command 'nosuch'" in done.stderr and "Traceback" not in done.stderr
