"""The Kubernetes manifests (``deploy/kubernetes``), offline, in both layouts: read-only servers
of a prepared volume, and a writing primary with replicas on its node. Each resource against the
Kubernetes schemas (``kubernetes-validate``, strict), their wiring (selectors, ports, volumes,
claims, affinity, Secrets), and every command and setting in them read by gnnstore's own command
line and configuration."""
from __future__ import annotations

import copy
import importlib.util
from pathlib import Path
from typing import Any

import click
import kubernetes_validate
import pytest
import yaml

from gnnstore.cli import cli
from gnnstore.config import load_config

ROOT = Path(__file__).resolve().parents[1]
READ_ONLY = ROOT / "deploy" / "kubernetes"
WRITABLE = READ_ONLY / "primary-and-replicas"
LAYOUTS = pytest.mark.parametrize("folder", [READ_ONLY, WRITABLE], ids=["read-only", "primary-and-replicas"])
VERSIONS = ("1.30", "1.37")  # the oldest Kubernetes still commonly run, and the newest schemas bundled
WORKLOADS = ("Deployment", "StatefulSet", "Job")


def _resources(folder: Path) -> list[dict[str, Any]]:
    kustomization = yaml.safe_load((folder / "kustomization.yaml").read_text())
    return [doc for name in kustomization["resources"] for doc in yaml.safe_load_all((folder / name).read_text())]


def _named(folder: Path, kind: str, name: str | None = None) -> dict[str, Any]:
    [found] = [r for r in _resources(folder) if r["kind"] == kind and name in (None, r["metadata"]["name"])]
    return found


def _pods(folder: Path) -> list[dict[str, Any]]:
    return [r["spec"]["template"] for r in _resources(folder) if r["kind"] in WORKLOADS]


def _servers(folder: Path) -> list[dict[str, Any]]:
    """The containers that run ``gnnstore serve``."""
    return [c for pod in _pods(folder) for c in pod["spec"]["containers"] if c["args"][:2] == ["gnnstore", "serve"]]


@LAYOUTS
def test_the_kustomization_lists_every_manifest(folder: Path) -> None:
    listed = yaml.safe_load((folder / "kustomization.yaml").read_text())["resources"]
    assert sorted(listed) == sorted(p.name for p in folder.glob("*.yaml") if p.name != "kustomization.yaml")


@LAYOUTS
@pytest.mark.parametrize("version", VERSIONS)
def test_every_resource_is_valid_against_the_schemas_and_a_typo_is_not(folder: Path, version: str) -> None:
    resources = _resources(folder)
    for resource in resources:
        kubernetes_validate.validate(resource, version, strict=True)
    typo = copy.deepcopy(next(r for r in resources if r["kind"] == "Deployment"))
    typo["spec"]["template"]["spec"]["containers"][0]["readinessProbes"] = {}
    with pytest.raises(kubernetes_validate.ValidationError, match="readinessProbes"):
        kubernetes_validate.validate(typo, version, strict=True)


def _selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return selector.items() <= labels.items()


@LAYOUTS
def test_the_trainers_service_is_headless_and_selects_every_server_by_its_port(folder: Path) -> None:
    service = _named(folder, "Service", "gnnstore")
    assert service["spec"]["clusterIP"] == "None"  # headless: one address per pod, for round robin
    [service_port] = service["spec"]["ports"]
    servers = [pod for pod in _pods(folder) if pod["spec"]["containers"][0]["args"][:2] == ["gnnstore", "serve"]]
    assert servers
    for pod in _pods(folder):
        assert _selects(service["spec"]["selector"], pod["metadata"]["labels"]) == (pod in servers)
    for container in _servers(folder):
        [port] = container["ports"]
        assert service_port["targetPort"] == port["name"] and service_port["port"] == port["containerPort"]
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert int(env["GNNSTORE_PORT"]) == port["containerPort"]


@LAYOUTS
def test_each_workload_selects_its_own_pods_and_no_other_workloads(folder: Path) -> None:
    workloads = [r for r in _resources(folder) if r["kind"] in ("Deployment", "StatefulSet")]
    for workload in workloads:
        selector = workload["spec"]["selector"]["matchLabels"]
        for other in workloads:
            assert _selects(selector, other["spec"]["template"]["metadata"]["labels"]) == (other is workload)
    for budget in (r for r in _resources(folder) if r["kind"] == "PodDisruptionBudget"):
        selector = budget["spec"]["selector"]["matchLabels"]
        [guarded] = [w for w in workloads if w["spec"]["selector"]["matchLabels"] == selector]
        assert guarded["kind"] == "Deployment"


@LAYOUTS
def test_every_mount_has_its_volume(folder: Path) -> None:
    for workload in (r for r in _resources(folder) if r["kind"] in WORKLOADS):
        pod = workload["spec"]["template"]
        volumes = {v["name"] for v in pod["spec"].get("volumes", [])}
        volumes |= {t["metadata"]["name"] for t in workload["spec"].get("volumeClaimTemplates", [])}
        for container in [*pod["spec"].get("initContainers", []), *pod["spec"]["containers"]]:
            for mount in container["volumeMounts"]:
                assert mount["name"] in volumes, (container["name"], mount["name"])


def test_read_only_servers_mount_the_prepared_claim_read_only() -> None:
    claim = _named(READ_ONLY, "PersistentVolumeClaim")["metadata"]["name"]
    for pod in _pods(READ_ONLY):
        assert {v["name"]: v for v in pod["spec"]["volumes"]}["data"]["persistentVolumeClaim"]["claimName"] == claim
    server = _named(READ_ONLY, "Deployment")["spec"]["template"]["spec"]
    assert server["volumes"][0]["persistentVolumeClaim"]["readOnly"] is True
    assert all(m.get("readOnly") for m in server["containers"][0]["volumeMounts"])


def test_replicas_run_on_the_primarys_node_over_its_own_claim() -> None:
    primary, replicas = _named(WRITABLE, "StatefulSet"), _named(WRITABLE, "Deployment")
    assert primary["spec"]["replicas"] == 1 and primary["spec"]["serviceName"] == "gnnstore-primary"
    writers = _named(WRITABLE, "Service", "gnnstore-primary")
    assert writers["spec"]["clusterIP"] == "None"
    assert _selects(writers["spec"]["selector"], primary["spec"]["template"]["metadata"]["labels"])
    assert not _selects(writers["spec"]["selector"], replicas["spec"]["template"]["metadata"]["labels"])
    [template] = primary["spec"]["volumeClaimTemplates"]
    assert template["spec"]["accessModes"] == ["ReadWriteOnce"]  # shared by pods on one node only
    pod = replicas["spec"]["template"]["spec"]
    claim = {v["name"]: v for v in pod["volumes"]}["data"]["persistentVolumeClaim"]["claimName"]
    assert claim == f"{template['metadata']['name']}-{primary['metadata']['name']}-0"  # Kubernetes' naming
    [term] = pod["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert _selects(term["labelSelector"]["matchLabels"], primary["spec"]["template"]["metadata"]["labels"])
    assert not _selects(term["labelSelector"]["matchLabels"], replicas["spec"]["template"]["metadata"]["labels"])
    assert "--replica" in pod["containers"][0]["args"]
    assert "--replica" not in primary["spec"]["template"]["spec"]["containers"][0]["args"]


def _command(words: list[str]) -> tuple[click.Command, list[str]]:
    assert words[0] == "gnnstore", words
    command, words = cli, words[1:]
    while isinstance(command, click.Group):
        command, words = command.get_command(click.Context(command), words[0]), words[1:]
        assert command is not None
    return command, words


@LAYOUTS
def test_every_container_runs_a_gnnstore_command_the_cli_parses(folder: Path) -> None:
    commands = set()
    for pod in _pods(folder):
        for container in [*pod["spec"].get("initContainers", []), *pod["spec"]["containers"]]:
            command, rest = _command(container["args"])
            command.make_context(command.name, list(rest))  # raises on an unknown option or a bad value
            commands.add(" ".join(container["args"][:3]))
    expected = ({"gnnstore snapshot prepare", "gnnstore serve --read-only"} if folder == READ_ONLY
                else {"gnnstore ingest generate", "gnnstore serve --max-connection-age-s", "gnnstore serve --replica"})
    assert expected <= commands


@LAYOUTS
def test_the_servers_settings_are_read_as_the_server_reads_them(folder: Path) -> None:
    page = (ROOT / "docs" / "how-to" / "kubernetes.md").read_text()
    for container in _servers(folder):
        env = {e["name"]: e.get("value", "from-a-secret") for e in container["env"]}
        config = load_config(None, env)
        assert config.host == "0.0.0.0" and str(config.data_dir) == "/data" and config.serve_data_port is False
        assert str(config.tls_cert) == "/certs/tls.crt" and str(config.tls_key) == "/certs/tls.key"
    secrets = {e["valueFrom"]["secretKeyRef"]["name"] for c in _servers(folder) for e in c["env"] if "valueFrom" in e}
    secrets |= {v["secret"]["secretName"] for pod in _pods(folder) for v in pod["spec"].get("volumes", [])
                if "secret" in v}
    assert secrets == {"gnnstore-tokens", "gnnstore-tls"} and all(f"secret generic {s}" in page for s in secrets)


@LAYOUTS
def test_the_probes_ask_the_health_service_ready_only_when_serving_alive_while_it_answers(folder: Path) -> None:
    for container in _servers(folder):
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            if probe not in container:
                continue
            command = container[probe]["exec"]["command"]
            assert command[:2] == ["python", "-m"] and importlib.util.find_spec(command[2]) is not None, probe
            assert command[3:] == (["--alive"] if probe == "livenessProbe" else []), probe
        assert "readinessProbe" in container and "livenessProbe" in container
