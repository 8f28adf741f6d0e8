"""deploy/ agrees with Cairn itself: the commands it runs exist, the variables it names are
settings, every example config loads, and the image and the compose file agree on ports."""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import click
import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from cairn.cli import main
from cairn.core.settings import load_settings, variables

REPO = Path(__file__).parents[2]
DEPLOY = REPO / "deploy"
DOCKERFILE = DEPLOY / "Dockerfile"
COMPOSE = DEPLOY / "compose.yaml"
EXAMPLES = DEPLOY / "examples"
EXAMPLE_FILES = sorted(EXAMPLES.glob("*.env"))
# Compose services built from this Dockerfile run `cairn`; the others are backing services.
CAIRN_DOCKERFILE = "deploy/Dockerfile"
BACKING_SERVICES = ("redis", "postgres", "qdrant")

OWN_PREFIXES = ("CAIRN_", "SLACK_", "MATRIX_", "ANTHROPIC_")
# CAIRN_CONFIG names the settings file, so config_file() reads it before there are settings.
KNOWN_VARIABLES = frozenset({*variables(), "CAIRN_CONFIG"})
VARIABLE = re.compile(r"\b(?:CAIRN|SLACK|MATRIX|ANTHROPIC)_[A-Z0-9_]+\b")
URL_VARIABLES = ("CAIRN_DATABASE_URL", "CAIRN_BROKER_URL", "CAIRN_REDIS_URL", "CAIRN_QDRANT_URL")
ASSIGNMENT = re.compile(r"([A-Z_][A-Z0-9_]*)=(.*)")
COMMENTED_ASSIGNMENT = re.compile(r"#\s*([A-Z_][A-Z0-9_]*)=(.*)")


# --- reading the files ---------------------------------------------------------------------


@dataclass(frozen=True)
class Instruction:
    keyword: str
    args: str


def _dockerfile() -> list[Instruction]:
    """The instructions of deploy/Dockerfile, continuation lines joined, comments dropped."""
    instructions: list[Instruction] = []
    pending = ""
    for raw in DOCKERFILE.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue  # Docker drops comment lines inside a continued instruction too
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        keyword, _, args = (pending + line).partition(" ")
        instructions.append(Instruction(keyword.upper(), args.strip()))
        pending = ""
    assert not pending, "deploy/Dockerfile ends inside a continued instruction"
    return instructions


def _final_stage() -> list[Instruction]:
    instructions = _dockerfile()
    last_from = max(i for i, ins in enumerate(instructions) if ins.keyword == "FROM")
    return instructions[last_from:]


def _exec_form(ins: Instruction) -> list[str]:
    assert ins.args.startswith("["), f"{ins.keyword} should use the exec form: {ins.args}"
    words = json.loads(ins.args)
    assert isinstance(words, list)
    return [str(w) for w in words]


def _only(keyword: str) -> Instruction:
    found = [ins for ins in _final_stage() if ins.keyword == keyword]
    assert found, f"deploy/Dockerfile's final stage has no {keyword}"
    return found[-1]  # as Docker does, the last one wins


def _image_env() -> dict[str, str]:
    env: dict[str, str] = {}
    for ins in _final_stage():
        if ins.keyword == "ENV":
            env.update(word.partition("=")[::2] for word in shlex.split(ins.args) if "=" in word)
    return env


def _exposed_ports() -> set[int]:
    return {
        int(word.split("/")[0])
        for ins in _final_stage()
        if ins.keyword == "EXPOSE"
        for word in ins.args.split()
    }


def _compose() -> dict[str, Any]:
    loaded = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict), "deploy/compose.yaml must be a YAML mapping"
    return loaded


def _services() -> dict[str, dict[str, Any]]:
    services = _compose()["services"]
    assert isinstance(services, dict)
    return services


def _cairn_services() -> dict[str, dict[str, Any]]:
    return {
        name: svc
        for name, svc in _services().items()
        if isinstance(svc.get("build"), dict) and svc["build"].get("dockerfile") == CAIRN_DOCKERFILE
    }


def _environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {str(k): str(v) for k, v in env.items()}


def _command(service: dict[str, Any]) -> list[str]:
    command = service.get("command") or []
    return shlex.split(command) if isinstance(command, str) else [str(w) for w in command]


def _container_ports(service: dict[str, Any]) -> set[int]:
    ports: set[int] = set()
    for entry in service.get("ports", []):
        if isinstance(entry, dict):
            ports.add(int(entry["target"]))
        else:  # "[ip:][host:]container[/protocol]"
            ports.add(int(str(entry).split("/")[0].rsplit(":", 1)[-1]))
    return ports


def _env_file(path: Path) -> tuple[dict[str, str], dict[str, str]]:
    """(assignments, commented-out assignments) of an env file in `docker --env-file` format."""
    active: dict[str, str] = {}
    commented: dict[str, str] = {}
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            if match := COMMENTED_ASSIGNMENT.fullmatch(line):
                commented[match[1]] = match[2]
            continue
        match = ASSIGNMENT.fullmatch(line)
        assert match, f"{path.name}:{number} is not a NAME=value line: {raw!r}"
        active[match[1]] = match[2]
    return active, commented


def _deploy_texts() -> dict[str, str]:
    files = sorted(p for p in DEPLOY.rglob("*") if p.is_file())
    return {str(p.relative_to(REPO)): p.read_text(encoding="utf-8") for p in files}


def _command_references() -> list[tuple[str, list[str]]]:
    """Every `cairn ...` that deploy/ runs or tells people to run: (where, words after cairn)."""
    refs: list[tuple[str, list[str]]] = []
    cmd = _only("CMD")
    refs.append(("Dockerfile CMD", _exec_form(cmd)))
    health = _only("HEALTHCHECK").args
    for match in re.finditer(r"\bcairn((?: +[^\s|&;<>]+)*)", health):
        refs.append(("Dockerfile HEALTHCHECK", match[1].split()))
    for name, service in _cairn_services().items():
        refs.append((f"compose service {name}", _command(service)))
    for where, text in _deploy_texts().items():
        for match in re.finditer(r"`cairn((?: [^`]*)?)`", text):
            refs.append((where, shlex.split(match[1])))
    return refs


def _unknown_command(words: list[str]) -> str | None:
    """None when `cairn WORDS` names a command of cairn.cli.main, else what is wrong."""
    command: click.Command | None = main
    ctx = click.Context(main)
    path = "cairn"
    for word in words:
        if word.startswith("-") or not isinstance(command, click.Group):
            break  # options and arguments follow
        names = command.list_commands(ctx)  # lazy subcommands included
        if word not in names:
            return f"`{path} {word}`: no such command (there are {sorted(names)})"
        command = command.get_command(ctx, word)
        path += f" {word}"
    return None


def _setenv(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)


# --- the image ------------------------------------------------------------------------------


def test_the_image_is_built_on_python_3_11_slim() -> None:
    bases = [ins.args.split()[0] for ins in _dockerfile() if ins.keyword == "FROM"]
    assert bases, "deploy/Dockerfile has no FROM"
    assert all(base == "python:3.11-slim" for base in bases), bases


def test_the_image_runs_as_a_non_root_user() -> None:
    user = _only("USER").args.split(":")[0]
    assert user not in {"root", "0"}, f"the image runs as {user!r}"


def test_cairn_home_is_the_data_volume() -> None:
    assert _image_env().get("CAIRN_HOME") == "/data"
    volume = _only("VOLUME").args
    volumes = json.loads(volume) if volume.startswith("[") else volume.split()
    assert "/data" in volumes, f"VOLUME {volume} does not hold CAIRN_HOME"


def test_the_entrypoint_is_cairn_and_the_default_command_is_run() -> None:
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "scripts"
    ]
    assert scripts.get("cairn") == "cairn.cli:main", "pyproject no longer installs `cairn`"
    assert _exec_form(_only("ENTRYPOINT")) == ["cairn"]
    assert _exec_form(_only("CMD")) == ["run"]


def test_the_healthcheck_runs_a_cairn_command() -> None:
    health = _only("HEALTHCHECK").args
    assert re.search(r"\bCMD\b.*\bcairn \w", health), f"HEALTHCHECK {health} runs no cairn command"


def test_installing_cairn_pulls_in_no_torch() -> None:
    # The image installs cairn-bot's dependencies as pip resolves them here; walk that closure.
    seen: set[str] = set()
    todo: list[tuple[str, frozenset[str]]] = [("cairn-bot", frozenset())]
    while todo:
        name, extras = todo.pop()
        key = f"{canonicalize_name(name)}{sorted(extras)}"
        if key in seen:
            continue
        seen.add(key)
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue  # only needed on another platform or Python, so not installed here
        for line in requires:
            req = Requirement(line)
            wanted = req.marker is None or any(
                req.marker.evaluate({"extra": extra}) for extra in extras | {""}
            )
            if wanted:
                todo.append((req.name, frozenset(req.extras)))
    names = {key.split("[")[0] for key in seen}
    assert "celery" in names, "the walk found too little to mean anything"
    assert "torch" not in names, "a dependency of cairn-bot pulls in torch"


# --- commands and variables -----------------------------------------------------------------


def test_every_cairn_command_that_deploy_names_exists() -> None:
    refs = _command_references()
    assert len(refs) >= 4, f"too few references to mean anything: {refs}"
    wrong = [f"{where}: {problem}" for where, words in refs if (problem := _unknown_command(words))]
    assert not wrong, "\n".join(wrong)


def test_an_unknown_cairn_command_is_caught() -> None:
    # The check above, shown to fail on what it is for.
    assert _unknown_command(["serve"]) is not None
    assert _unknown_command(["memory", "wipe"]) is not None
    assert _unknown_command(["memory", "recall", "deploys", "-k", "3"]) is None


def test_every_variable_named_in_deploy_is_one_cairn_reads() -> None:
    unknown = {
        f"{where}: {name}"
        for where, text in _deploy_texts().items()
        for name in VARIABLE.findall(text)
        if name not in KNOWN_VARIABLES
    }
    assert not unknown, "not Cairn settings:\n" + "\n".join(sorted(unknown))


def test_compose_and_the_examples_set_only_variables_cairn_reads() -> None:
    named: dict[str, list[str]] = {
        f"compose.yaml {name}": list(_environment(service)) for name, service in _services().items()
    }
    for path in EXAMPLE_FILES:
        active, commented = _env_file(path)
        named[path.name] = [*active, *commented]
    ours = [
        (where, var)
        for where, names in named.items()
        for var in names
        if var.startswith(OWN_PREFIXES)
    ]
    assert ours, "found no variables at all"
    unknown = [f"{where}: {var}" for where, var in ours if var not in KNOWN_VARIABLES]
    assert not unknown, "not Cairn settings:\n" + "\n".join(unknown)


# --- the example configs --------------------------------------------------------------------


def test_there_is_an_example_for_each_way_to_run_cairn() -> None:
    names = {p.name for p in EXAMPLE_FILES}
    assert names >= {"console.env", "slack-socket-mode.env", "slack-http.env", "matrix.env"}


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.name)
def test_example_loads_into_cairns_settings(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    active, _ = _env_file(path)
    _setenv(monkeypatch, active)
    load_settings()  # raises ConfigError naming the variable


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.name)
def test_example_still_loads_with_its_optional_lines_uncommented(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    active, commented = _env_file(path)
    _setenv(monkeypatch, active | commented)
    load_settings()


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.name)
def test_example_values_are_literal(path: Path) -> None:
    # `docker run --env-file` keeps quotes and ${...} as they are; Compose would not.
    active, commented = _env_file(path)
    for name, value in (active | commented).items():
        assert not value.startswith(("'", '"')), f"{path.name}: {name} is quoted"
        assert "${" not in value, f"{path.name}: {name} uses interpolation"


@pytest.mark.parametrize(
    ("example", "platform"),
    [
        ("console.env", "console"),
        ("slack-socket-mode.env", "slack-socket-mode"),
        ("slack-http.env", "slack-http"),
        ("matrix.env", "matrix"),
    ],
)
def test_each_example_selects_its_chat_platform(
    example: str, platform: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    active, _ = _env_file(EXAMPLES / example)
    _setenv(monkeypatch, active)
    s = load_settings()
    selected = {
        "slack-socket-mode": bool(s.slack.bot_token and s.slack.app_token),
        "slack-http": bool(s.slack.bot_token and s.slack.signing_secret and not s.slack.app_token),
        "matrix": bool(s.matrix.homeserver),
        "console": not (s.slack.bot_token or s.matrix.homeserver),
    }
    assert [name for name, on in selected.items() if on] == [platform]


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.name)
def test_compose_environment_with_example_is_a_valid_configuration(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    active, _ = _env_file(path)
    for name, service in _cairn_services().items():
        _setenv(monkeypatch, active | _environment(service))  # environment wins over env_file
        s = load_settings()
        assert s.effective_database_url.startswith("postgresql://"), name
        assert s.broker_url is not None, name


# --- the compose file -----------------------------------------------------------------------


def test_compose_runs_the_frontend_and_workers_with_cairn() -> None:
    services = _cairn_services()
    assert _command(services["frontend"])[:1] == ["run"]
    assert _command(services["worker"])[:1] == ["worker"]
    assert _command(services["migrate"])[:1] == ["migrate"]


def test_service_urls_point_at_services_of_the_compose_file() -> None:
    services = _services()
    checked = 0
    for name, service in _cairn_services().items():
        for var in URL_VARIABLES:
            url = _environment(service).get(var)
            if url is None:
                continue
            host = urlsplit(url).hostname
            assert host in services, f"{name}: {var}={url} points at no service of compose.yaml"
            checked += 1
    assert checked, "no service URL in compose.yaml"


def test_compose_is_on_postgres_redis_and_qdrant() -> None:
    env = _environment(_cairn_services()["worker"])
    assert env.get("CAIRN_DATABASE_URL") == "postgresql://cairn:cairn@postgres:5432/cairn"
    assert env.get("CAIRN_BROKER_URL") == "redis://redis:6379/0"
    assert env.get("CAIRN_QDRANT_URL") == "http://qdrant:6333"


@pytest.mark.parametrize("name", BACKING_SERVICES)
def test_backing_service_has_a_healthcheck_and_a_named_volume(name: str) -> None:
    service = _services()[name]
    assert service.get("healthcheck", {}).get("test"), f"{name} has no health check"
    declared = set(_compose().get("volumes") or {})
    sources = [str(v).split(":")[0] for v in service.get("volumes", [])]
    assert sources, f"{name} keeps its data in no volume"
    assert all(s in declared for s in sources), f"{name}: {sources} not all named volumes"


def test_cairn_services_start_after_the_migration_and_healthy_backing_services() -> None:
    services = _services()
    for name, service in _cairn_services().items():
        depends = service.get("depends_on") or {}
        assert isinstance(depends, dict), f"{name}: depends_on needs conditions"
        for dep, rule in depends.items():
            condition = rule.get("condition")
            if dep == "migrate":
                assert condition == "service_completed_successfully", f"{name} -> migrate"
            else:
                assert condition == "service_healthy", f"{name} -> {dep}: {condition}"
                assert services[dep].get("healthcheck"), f"{dep} has no health check to wait for"
        if name != "migrate":
            assert "migrate" in depends, f"{name} may start before the schema is migrated"
    assert "postgres" in (services["migrate"].get("depends_on") or {})


def test_compose_publishes_only_ports_the_image_exposes() -> None:
    exposed = _exposed_ports()
    for name, service in _cairn_services().items():
        extra = _container_ports(service) - exposed
        assert not extra, f"{name} publishes {sorted(extra)}, the image exposes {sorted(exposed)}"


def test_the_frontend_publishes_every_port_the_image_exposes() -> None:
    exposed = _exposed_ports()
    assert exposed == {3000}, f"EXPOSE {sorted(exposed)}; Slack's HTTP mode expects 3000"
    published = _container_ports(_cairn_services()["frontend"])
    assert exposed <= published, f"frontend publishes {sorted(published)}"
