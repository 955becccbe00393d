"""The Kubernetes manifests (``deploy/kubernetes``), offline: each resource against the Kubernetes
schemas (``kubernetes-validate``, strict), their wiring (selectors, ports, volumes, Secrets), and
every command and setting in them read by gnnstore's own command line and configuration."""
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
FOLDER = ROOT / "deploy" / "kubernetes"
VERSIONS = ("1.30", "1.37")  # the oldest Kubernetes still commonly run, and the newest schemas bundled


def _resources() -> list[dict[str, Any]]:
    kustomization = yaml.safe_load((FOLDER / "kustomization.yaml").read_text())
    return [doc for name in kustomization["resources"] for doc in yaml.safe_load_all((FOLDER / name).read_text())]


def _one(kind: str) -> dict[str, Any]:
    [found] = [r for r in _resources() if r["kind"] == kind]
    return found


def _pods() -> list[dict[str, Any]]:
    return [r["spec"]["template"]["spec"] for r in _resources() if r["kind"] in ("Deployment", "Job")]


def test_the_kustomization_lists_every_manifest() -> None:
    listed = yaml.safe_load((FOLDER / "kustomization.yaml").read_text())["resources"]
    assert sorted(listed) == sorted(p.name for p in FOLDER.glob("*.yaml") if p.name != "kustomization.yaml")


@pytest.mark.parametrize("version", VERSIONS)
def test_every_resource_is_valid_against_the_schemas_and_a_typo_is_not(version: str) -> None:
    resources = _resources()
    assert {r["kind"] for r in resources} == {"PersistentVolumeClaim", "Job", "Deployment", "Service",
                                              "PodDisruptionBudget"}
    for resource in resources:
        kubernetes_validate.validate(resource, version, strict=True)
    typo = copy.deepcopy(_one("Deployment"))
    typo["spec"]["template"]["spec"]["containers"][0]["readinessProbes"] = {}
    with pytest.raises(kubernetes_validate.ValidationError, match="readinessProbes"):
        kubernetes_validate.validate(typo, version, strict=True)


def test_the_service_and_the_budget_select_the_servers_pods_by_their_port() -> None:
    deployment, service, budget = _one("Deployment"), _one("Service"), _one("PodDisruptionBudget")
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert selector.items() <= pod_labels.items()
    assert service["spec"]["selector"] == selector == budget["spec"]["selector"]["matchLabels"]
    assert service["spec"]["clusterIP"] == "None"  # headless: one address per pod, for round robin
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    [port] = container["ports"]
    [service_port] = service["spec"]["ports"]
    assert service_port["targetPort"] == port["name"] and service_port["port"] == port["containerPort"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert int(env["GNNSTORE_PORT"]) == port["containerPort"]


def test_every_mount_has_its_volume_and_the_servers_mount_the_prepared_claim_read_only() -> None:
    claim = _one("PersistentVolumeClaim")["metadata"]["name"]
    for pod in _pods():
        volumes = {v["name"]: v for v in pod["volumes"]}
        for container in [*pod.get("initContainers", []), *pod["containers"]]:
            for mount in container["volumeMounts"]:
                assert mount["name"] in volumes, (container["name"], mount["name"])
        assert volumes["data"]["persistentVolumeClaim"]["claimName"] == claim
    server = _one("Deployment")["spec"]["template"]["spec"]
    assert server["volumes"][0]["persistentVolumeClaim"]["readOnly"] is True
    assert all(m.get("readOnly") for m in server["containers"][0]["volumeMounts"])


def _command(words: list[str]) -> tuple[click.Command, list[str]]:
    assert words[0] == "gnnstore", words
    command, words = cli, words[1:]
    while isinstance(command, click.Group):
        command, words = command.get_command(click.Context(command), words[0]), words[1:]
        assert command is not None
    return command, words


def test_every_container_runs_a_gnnstore_command_the_cli_parses() -> None:
    commands = []
    for pod in _pods():
        for container in [*pod.get("initContainers", []), *pod["containers"]]:
            command, rest = _command(container["args"])
            command.make_context(command.name, list(rest))  # raises on an unknown option or a bad value
            commands.append(" ".join(container["args"][:3]))
    assert "gnnstore snapshot prepare" in commands and "gnnstore serve --read-only" in commands


def test_the_servers_settings_are_read_as_the_server_reads_them() -> None:
    [container] = _one("Deployment")["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value", "from-a-secret") for e in container["env"]}
    config = load_config(None, env)
    assert config.host == "0.0.0.0" and str(config.data_dir) == "/data" and config.serve_data_port is False
    assert str(config.tls_cert) == "/certs/tls.crt" and str(config.tls_key) == "/certs/tls.key"
    secrets = {e["valueFrom"]["secretKeyRef"]["name"] for e in container["env"] if "valueFrom" in e}
    secrets |= {v["secret"]["secretName"] for v in _one("Deployment")["spec"]["template"]["spec"]["volumes"]
                if "secret" in v}
    page = (ROOT / "docs" / "how-to" / "kubernetes.md").read_text()
    assert secrets == {"gnnstore-tokens", "gnnstore-tls"} and all(f"secret generic {s}" in page for s in secrets)


def test_the_probes_ask_the_health_service_with_the_modules_that_exist() -> None:
    [container] = _one("Deployment")["spec"]["template"]["spec"]["containers"]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        command = container[probe]["exec"]["command"]
        assert command[:2] == ["python", "-m"] and importlib.util.find_spec(command[2]) is not None, probe
