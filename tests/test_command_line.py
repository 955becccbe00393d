"""The ``gnnstore`` command line: every help and the version answer without loading torch or PyG,
every command it lists is there, and bad usage is one line and exit status 2."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import click
import pytest

from gnnstore.cli import COMMANDS, cli


def _commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command's words under ``group`` (``("ingest", "files")``, ...), groups included."""
    found = []
    for name in group.list_commands(click.Context(group)):
        command = group.get_command(click.Context(group), name)
        found.append((*prefix, name))
        if isinstance(command, click.Group):
            found += _commands(command, (*prefix, name))
    return found


@pytest.mark.parametrize("args", [["--help"], ["version"], *[[*words, "--help"] for words in _commands(cli)]],
                         ids=" ".join)
def test_help_and_version_load_neither_torch_nor_pyg(args: list[str]) -> None:
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "gnnstore", *args], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    loaded = {line.split("|")[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    assert not {"torch", "torch_geometric"} & loaded, "the CLI root imported torch or PyG"
    assert "Warning" not in done.stderr
    if args == ["--help"]:
        assert all(name in done.stdout for name in COMMANDS)
    elif args[-1] == "--help":
        assert done.stdout.startswith("Usage: ")


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_listed_command_is_the_command_of_that_name(name: str) -> None:
    command = cli.get_command(click.Context(cli), name)
    assert isinstance(command, click.Command) and command.name == name


def test_an_unknown_command_is_named_with_exit_2() -> None:
    done = subprocess.run([sys.executable, "-m", "gnnstore", "nosuch"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "No such command 'nosuch'" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("args, problem", [
    (["serve", "--no-such-flag"], "No such option '--no-such-flag'"),
    (["serve", "--config", "{tmp}/missing.toml"], "missing.toml' does not exist"),
    (["serve", "--config", "{tmp}/broken.toml"], "broken.toml is not TOML"),
    (["serve", "--config", "{tmp}/binary.toml"], "binary.toml cannot be read: not UTF-8 text"),
    (["serve", "--config", "{tmp}/unknown.toml"], "unknown.toml: unknown key 'prot'"),
    (["serve", "--data-dir", "{tmp}/nowhere"], "nowhere does not exist; create it with `gnnstore ingest"),
    (["serve", "--data-dir", "{tmp}/not-data"], "not-data lacks graph, features, idmap"),
    (["ingest", "files", "--nodes", "{tmp}/none.csv"], "file '{tmp}/none.csv' does not exist"),
    (["migrate", "--data-dir", "{tmp}/not-data", "--to", "ladybug"], "holds no graph"),
    (["snapshot", "prepare", "--data-dir", "{tmp}/nowhere"], "nowhere does not exist; create it with `gnnstore ingest"),
    (["snapshot", "create", "--data-dir", "{tmp}/not-data", "{tmp}/copy"], "not-data lacks graph, features, idmap"),
    (["snapshot", "create", "--data-dir", "{tmp}/not-data", "{tmp}/not-data"], "not-data exists; snapshot create"),
])
def test_bad_usage_is_one_line_naming_the_problem_with_exit_2(tmp_path: Path, args: list[str], problem: str) -> None:
    (tmp_path / "broken.toml").write_text("port = = 1\n")
    (tmp_path / "binary.toml").write_bytes(b"\xff\xfe\x00")
    (tmp_path / "unknown.toml").write_text("prot = 50051\n")
    (tmp_path / "not-data").mkdir()
    (tmp_path / "not-data" / "notes.txt").write_text("a folder of something else")
    argv = [arg.format(tmp=tmp_path) for arg in args]
    done = subprocess.run([sys.executable, "-m", "gnnstore", *argv], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert problem.format(tmp=tmp_path) in done.stderr
    assert "Traceback" not in done.stderr and "Warning" not in done.stderr
    assert done.stdout == ""
    assert sorted(p.name for p in (tmp_path / "not-data").iterdir()) == ["notes.txt"]  # nothing written there
