"""docker/Dockerfile and docker-compose.yml, checked statically (no Docker engine runs here).

Services, healthchecks, start order, environment wiring against the server's config fields,
ports, and that every command they run and every file they copy exists in the project.
"""
from __future__ import annotations

import dataclasses
import importlib.util
import json
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import click
import pytest
import yaml

from gnnstore.cli import cli
from gnnstore.config import ENV_PREFIX, ServerConfig, load_config
from gnnstore.ingest.cli import resolve_target

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]
SCRIPTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]


def dockerfile() -> list[tuple[str, str]]:
    """``(INSTRUCTION, arguments)`` per instruction, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", (ROOT / "docker" / "Dockerfile").read_text())
    lines = [line.strip() for line in text.splitlines()]
    return [tuple(line.split(None, 1)) for line in lines if line and not line.startswith("#")]


def instructions(name: str) -> list[str]:
    return [args for instr, args in dockerfile() if instr == name]


def exec_form(args: str) -> list[str]:
    return json.loads(args[args.index("[") :])


def environment(service: str) -> dict[str, str]:
    return {k: str(v) for k, v in SERVICES[service].get("environment", {}).items()}


def assert_runs_a_real_command(argv: list[str]) -> None:
    """``argv`` is a [project.scripts] entry point whose click subcommand and flags exist."""
    assert argv[0] in SCRIPTS, f"{argv[0]} is not in [project.scripts] ({sorted(SCRIPTS)})"
    command: click.Command = cli
    args = argv[1:]
    while args and isinstance(command, click.Group) and not args[0].startswith("-"):
        name, args = args[0], args[1:]
        names = command.list_commands(click.Context(command))
        assert name in names, f"{argv}: {name!r} is not a subcommand ({names})"
        command = command.get_command(click.Context(command), name)
    options = {opt for param in command.params for opt in param.opts + param.secondary_opts}
    for arg in args:
        if arg.startswith("--"):
            assert arg.split("=")[0] in options, f"{argv}: {arg} is not an option of {command.name}"


def test_compose_has_the_services() -> None:
    assert set(SERVICES) == {"neo4j", "gnnstore", "ingest", "replica"}
    assert SERVICES["neo4j"]["image"] == "neo4j:5.26-community"


def test_neo4j_keeps_its_data_in_a_volume_and_has_a_healthcheck() -> None:
    neo4j = SERVICES["neo4j"]
    volume = neo4j["volumes"][0].split(":")
    assert volume[1] == "/data" and volume[0] in COMPOSE["volumes"]
    test = neo4j["healthcheck"]["test"]
    assert test[0] == "CMD-SHELL" and "cypher-shell" in test[1] and "RETURN 1" in test[1]
    assert "${GNNSTORE_NEO4J_PASSWORD" in neo4j["environment"]["NEO4J_AUTH"]


def test_services_start_in_order() -> None:
    assert SERVICES["ingest"]["depends_on"] == {"neo4j": {"condition": "service_healthy"}}
    assert SERVICES["gnnstore"]["depends_on"] == {
        "neo4j": {"condition": "service_healthy"},
        "ingest": {"condition": "service_completed_successfully"},
    }
    assert SERVICES["ingest"]["restart"] == "no"
    assert SERVICES["replica"]["depends_on"] == {"gnnstore": {"condition": "service_healthy"}}


def test_replicas_follow_the_primary_over_its_volume_when_scaled_up() -> None:
    replica, primary = environment("replica"), environment("gnnstore")
    assert SERVICES["replica"]["profiles"] == ["replicas"]  # `--profile replicas up --scale replica=N`
    assert all("profiles" not in SERVICES[name] for name in ("neo4j", "ingest", "gnnstore"))
    assert replica["GNNSTORE_REPLICA"] == "true" and "GNNSTORE_REPLICA" not in primary
    assert SERVICES["replica"]["volumes"] == SERVICES["gnnstore"]["volumes"]
    assert SERVICES["replica"]["image"] == SERVICES["gnnstore"]["image"]
    assert SERVICES["replica"]["ports"] == ["127.0.0.1::50051"]  # each scaled replica: a free loopback port
    assert replica["GNNSTORE_AUTH_TOKENS"] == primary["GNNSTORE_AUTH_TOKENS"]
    assert SERVICES["replica"]["command"] == SERVICES["gnnstore"]["command"]


@pytest.mark.parametrize("service", ["gnnstore", "ingest", "replica"])
def test_environment_names_are_server_config_fields(service: str) -> None:
    env = environment(service)
    fields = {f.name for f in dataclasses.fields(ServerConfig)}
    for name in env:
        assert name.startswith(ENV_PREFIX) and name[len(ENV_PREFIX):].lower() in fields, name
    assert env["GNNSTORE_GRAPH_BACKEND"] == "neo4j"
    assert env["GNNSTORE_NEO4J_URI"] == "bolt://neo4j:7687"  # the compose service name
    assert env["GNNSTORE_NEO4J_PASSWORD"].startswith("${GNNSTORE_NEO4J_PASSWORD:?")  # never a literal
    volume = SERVICES[service]["volumes"][0].split(":")
    assert volume[1] == env["GNNSTORE_DATA_DIR"] and volume[0] in COMPOSE["volumes"]


def test_gnnstore_publishes_its_ports_on_this_hosts_loopback_and_needs_tokens() -> None:
    env = environment("gnnstore")
    published = re.fullmatch(r"([\d.]+):\$\{GNNSTORE_PUBLISH_PORT:-(\d+)\}:(\d+)",
                             SERVICES["gnnstore"]["ports"][0])
    assert published, SERVICES["gnnstore"]["ports"][0]
    host_ip, host_port, container_port = published.groups()
    assert container_port == env["GNNSTORE_PORT"] == "50051" and host_port == "50051"
    assert host_ip == "127.0.0.1"  # open it to the network on purpose, not by default
    assert env["GNNSTORE_HOST"] == "0.0.0.0"  # reachable through the published port
    # Required like the Neo4j password: compose refuses to start without it.
    assert env["GNNSTORE_AUTH_TOKENS"].startswith("${GNNSTORE_AUTH_TOKENS:?")
    data = re.fullmatch(r"([\d.]+):\$\{GNNSTORE_PUBLISH_DATA_PORT:-(\d+)\}:(\d+)", SERVICES["gnnstore"]["ports"][1])
    assert data, SERVICES["gnnstore"]["ports"][1]
    assert data.groups() == ("127.0.0.1", env["GNNSTORE_DATA_PORT"], env["GNNSTORE_DATA_PORT"])
    # Clients are told the number the host publishes, whatever it is.
    assert env["GNNSTORE_DATA_PUBLIC_PORT"] == "${GNNSTORE_PUBLISH_DATA_PORT:-%s}" % env["GNNSTORE_DATA_PORT"]
    expose = instructions("EXPOSE")
    assert expose == [f"{env['GNNSTORE_PORT']} {env['GNNSTORE_DATA_PORT']}"]


def test_the_server_and_the_tools_images_build_from_the_dockerfile() -> None:
    stages = [args.split()[-1] for args in instructions("FROM") if " AS " in args]
    for service, target in (("gnnstore", "server"), ("ingest", "tools")):
        build = SERVICES[service]["build"]
        assert (ROOT / build["context"] / build["dockerfile"]).resolve() == ROOT / "docker" / "Dockerfile"
        assert build["target"] == target and target in stages
    assert SERVICES["gnnstore"]["image"] != SERVICES["ingest"]["image"]
    assert instructions("FROM")[-1] == "server"  # a plain `docker build` makes the server


def test_the_server_image_installs_no_torch() -> None:
    server = [args for instr, args in _stage("server") if instr == "RUN"]
    deps = [args for instr, args in _stage("deps") if instr == "RUN"]
    assert any("p['dependencies']" in run for run in deps) and not any("train" in run for run in deps + server)
    tools = [args for instr, args in _stage("tools-deps") if instr == "RUN"]
    assert any("['train']" in run for run in tools)


def _stage(name: str) -> list[tuple[str, str]]:
    """The instructions of one build stage (from its FROM to the next)."""
    found, stage = [], None
    for instr, args in dockerfile():
        if instr == "FROM":
            stage = args.split()[-1] if " AS " in args else None
        elif stage == name:
            found.append((instr, args))
    return found


@pytest.mark.parametrize("service", ["gnnstore", "ingest"])
def test_compose_commands_exist(service: str) -> None:
    assert_runs_a_real_command(SERVICES[service]["command"])


def test_ingest_loads_the_graph_into_the_neo4j_the_server_reads() -> None:
    argv = SERVICES["ingest"]["command"]
    generate = cli.get_command(click.Context(cli), "ingest").commands["generate"]
    params = generate.make_context("generate", argv[3:]).params
    env = environment("ingest") | {"GNNSTORE_NEO4J_PASSWORD": "from-the-shell"}  # compose fills it in
    target = resolve_target(params["data_dir"], env, graph_backend=params["graph_backend"],
                            neo4j_uri=params["neo4j_uri"], neo4j_user=params["neo4j_user"])
    served = load_config(None, environment("gnnstore") | {  # as compose fills them in
        "GNNSTORE_NEO4J_PASSWORD": "from-the-shell", "GNNSTORE_DATA_PUBLIC_PORT": "50052"
    })
    assert target.graph_backend == served.graph_backend == "neo4j"
    assert target.neo4j_uri == served.neo4j_uri == "bolt://neo4j:7687"
    assert target.neo4j_auth == (served.neo4j_user, served.neo4j_password)
    assert target.data_dir == served.data_dir  # features and ids where the server reads them
    assert served.serve_data_port and served.data_port == served.data_public_port == 50052


def test_dockerfile_base_user_install_and_command() -> None:
    assert instructions("FROM")[0] == "python:3.11-slim AS deps"
    for stage in ("server", "tools"):
        (user,) = [args for instr, args in _stage(stage) if instr == "USER"]
        assert user not in ("root", "0")
        assert any("useradd" in run and user in run for run in instructions("RUN"))
        assert ("RUN", "pip install --no-deps .") in _stage(stage)
    (cmd,) = [args for instr, args in _stage("server") if instr == "CMD"]
    assert exec_form(cmd) == ["gnnstore", "serve"]
    assert_runs_a_real_command(exec_form(cmd))
    env = " ".join(instructions("ENV"))
    assert "GNNSTORE_HOST=0.0.0.0" in env and "GNNSTORE_DATA_DIR=/data" in env


def test_dockerfile_installs_the_dependencies_and_the_neo4j_and_kuzu_extras_before_the_code(tmp_path: Path) -> None:
    """The dependency layer installs what pyproject.toml lists, so code changes keep it cached."""
    (deps,) = [run for run in instructions("RUN") if "requirements.txt" in run]
    snippet = shlex.split(deps.split(">", 1)[0])[2]  # python -c "<snippet>" > /tmp/requirements.txt
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    printed = subprocess.run([sys.executable, "-c", snippet], cwd=tmp_path, capture_output=True,
                             text=True, check=True).stdout.split()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    assert printed == project["dependencies"] + extras["neo4j"] + extras["kuzu"]
    assert "-r /tmp/requirements.txt" in deps
    runs = instructions("RUN")
    copies = [args for instr, args in dockerfile() if instr in ("RUN", "COPY")]
    assert copies.index(deps) < copies.index("core ./core") < copies.index("pip install --no-deps .")
    assert runs.index(deps) < runs.index("pip install --no-deps .")


def test_dockerfile_copies_files_that_exist_and_every_package_folder() -> None:
    copied = []
    for args in instructions("COPY"):
        if args.startswith("--from="):
            continue  # another stage's files
        *sources, _ = shlex.split(args)
        for source in sources:
            assert (ROOT / source).exists(), f"COPY {source}: no such file in the repository"
            copied.append(source)
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert set(tool["package-dir"].values()) <= set(copied), "a package folder is not copied"


def test_healthcheck_runs_the_health_probe() -> None:
    (health,) = instructions("HEALTHCHECK")
    argv = exec_form(health)
    assert argv == ["python", "-m", "gnnstore.backend.server.health_probe"]  # tests/backend/test_health_probe.py
    assert importlib.util.find_spec(argv[2]) is not None
