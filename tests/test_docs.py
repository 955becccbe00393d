"""The documentation cannot rot: the site builds with ``mkdocs build --strict``, every Python block
compiles, every ``gnnstore`` command line names commands and options that exist, and the training
scripts of the README and Getting started train against a real server."""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
import warm_launcher
from served import ServerProcess, ingest, start_server

from gnnstore.cli import COMMANDS, cli
from gnnstore.ingest.generator import generate_graph

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
SCRIPTS = [ROOT / "README.md", ROOT / "docs" / "getting-started.md"]  # complete training scripts


def _blocks(page: Path, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```$", page.read_text(), flags=re.M | re.S)


def _command_lines(page: Path) -> Iterator[list[str]]:
    """Each ``gnnstore ...`` line of the page's bash blocks, continuations joined, as words."""
    for block in _blocks(page, "bash"):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            while words and re.fullmatch(r"[A-Z_]+=.*", words[0]):  # VAR=value before the command
                words.pop(0)
            if words[:1] == ["gnnstore"]:
                yield words[1:]


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    cli_page = (tmp_path / "site" / "reference" / "cli" / "index.html").read_text()
    assert "--data-dir" in cli_page and "--max-sample-edges" in cli_page  # generated from the commands
    api_page = (tmp_path / "site" / "reference" / "api" / "index.html").read_text()
    assert "retry_timeout" in api_page  # connect()'s docstring, read from the source
    loader = (tmp_path / "site" / "benchmarks" / "loader" / "index.html").read_text()
    assert "commit" in loader and "batches/s" in loader  # the page the benchmark wrote
    assert (tmp_path / "site" / "benchmarks" / "loader.png").stat().st_size > 0


def test_the_cli_reference_has_every_command() -> None:
    page = (ROOT / "docs" / "reference" / "cli.md").read_text()
    for name, (target, _) in COMMANDS.items():
        module, attribute = target.split(":")
        assert f":module: {module}\n    :command: {attribute}\n    :prog_name: gnnstore {name}\n" in page, name


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_python_block_compiles(page: Path) -> None:
    for number, block in enumerate(_blocks(page, "python")):
        compile(block, f"{page.name} block {number}", "exec")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_command_line_names_commands_and_options_that_exist(page: Path) -> None:
    for words in _command_lines(page):
        command: click.Command = cli
        while isinstance(command, click.Group) and words and not words[0].startswith("-"):
            found = command.get_command(click.Context(command), words[0])
            assert found is not None, f"{page.name}: `gnnstore ... {words[0]}` is no command"
            command, words = found, words[1:]
        options = {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)} | {"--help"}
        for word in words:
            if word.startswith("--"):
                assert word.split("=")[0] in options, f"{page.name}: `gnnstore {command.name}` has no {word}"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    data_dir = ingest(generate_graph(2000, 8.0, 16, 4, seed=1), tmp_path_factory.mktemp("docs") / "data")
    with start_server(data_dir, "--read-only") as running:
        yield running


@pytest.mark.parametrize("page", SCRIPTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_training_script_trains_against_a_server(page: Path, server: ServerProcess, tmp_path: Path) -> None:
    (script,) = [block for block in _blocks(page, "python") if "for batch in loader" in block]
    script = script.replace("127.0.0.1:50051", server.address) + "\nprint('loss', float(loss))\n"
    done = warm_launcher.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env={**os.environ, "GNNSTORE_ADDRESS": server.address})
    assert done.returncode == 0, done.stderr[-3000:]
    loss = float(re.findall(r"^loss (\S+)$", done.stdout, flags=re.M)[-1])
    assert 0 < loss < 10
