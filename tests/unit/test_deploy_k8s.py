"""deploy/k8s agrees with Cairn: real commands and options, known settings, consistent ports,
non-root pods, probes on ports that exist, and the autoscaler watching the real queue."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import pytest
import yaml

from cairn.cli import main
from cairn.core.settings import load_settings, variables
from cairn.workers.celery_app import app as celery_app

MANIFEST = Path(__file__).parents[2] / "deploy" / "k8s" / "cairn.yaml"
DOCS: list[dict[str, Any]] = [d for d in yaml.safe_load_all(MANIFEST.read_text()) if d]
KNOWN = set(variables())


def _kind(kind: str) -> list[dict[str, Any]]:
    return [d for d in DOCS if d["kind"] == kind]


def _pod_specs() -> list[tuple[str, dict[str, Any]]]:
    specs = [(d["metadata"]["name"], d["spec"]["template"]["spec"]) for d in _kind("Deployment")]
    specs += [(d["metadata"]["name"], d["spec"]["template"]["spec"]) for d in _kind("Job")]
    return specs


def _settings_data() -> dict[str, str]:
    [config] = _kind("ConfigMap")
    [secret] = _kind("Secret")
    return {**config["data"], **secret["stringData"]}


def test_every_variable_in_the_config_and_secret_is_a_cairn_setting() -> None:
    unknown = sorted(set(_settings_data()) - KNOWN)
    assert unknown == []


def test_the_config_and_secret_together_are_valid_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for key, value in _settings_data().items():
        monkeypatch.setenv(key, value)
    settings = load_settings()
    assert settings.broker_url == "redis://redis:6379/0"


@pytest.mark.parametrize(("name", "spec"), _pod_specs())
def test_each_container_runs_a_real_cairn_command_with_real_options(
    name: str, spec: dict[str, Any]
) -> None:
    for container in spec["containers"]:
        command, *options = container["args"]
        assert command in main.commands, f"{name}: no `cairn {command}`"
        known = {
            opt
            for p in main.commands[command].params
            if isinstance(p, click.Option)
            for opt in p.opts
        }
        flags = [o for o in options if o.startswith("-")]
        assert set(flags) <= known, f"{name}: unknown options {set(flags) - known}"


@pytest.mark.parametrize(("name", "spec"), _pod_specs())
def test_pods_run_as_non_root(name: str, spec: dict[str, Any]) -> None:
    assert spec["securityContext"]["runAsNonRoot"] is True


@pytest.mark.parametrize(
    ("name", "spec"), [(n, s) for n, s in _pod_specs() if not n.endswith("migrate")]
)
def test_probes_use_declared_ports_and_the_metrics_port_is_the_configured_one(
    name: str, spec: dict[str, Any]
) -> None:
    [container] = spec["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    probe = container["livenessProbe"]["httpGet"]
    assert probe["port"] in ports
    assert ports["metrics"] == int(_settings_data()["CAIRN_METRICS_PORT"])


def test_there_is_exactly_one_beat() -> None:
    beats = [
        d
        for d in _kind("Deployment")
        if "--beat" in d["spec"]["template"]["spec"]["containers"][0]["args"]
    ]
    assert [d["spec"]["replicas"] for d in beats] == [1]


def test_the_autoscaler_watches_the_celery_queue_of_the_worker_deployment() -> None:
    [scaler] = _kind("ScaledObject")
    [trigger] = scaler["spec"]["triggers"]
    assert trigger["metadata"]["listName"] == celery_app.conf.task_default_queue
    assert scaler["spec"]["scaleTargetRef"]["name"] in {
        d["metadata"]["name"] for d in _kind("Deployment")
    }
