"""MCP servers in cairn.toml: clear errors, masked credentials, tool names the Messages API
accepts, which tools an agent sees, and which need a person's approval."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cairn.core.errors import ConfigError
from cairn.core.secrets import mask_secrets_in
from cairn.core.settings import McpServerSpec, Settings, load_settings
from cairn.llm.offline import OfflineLLM
from cairn.llm.types import LLMRequest, Message, ToolSpec
from cairn.mcp import RemoteTool, agent_tools, approval_for, exposed_name

TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")

OPS = """
cairn_agent = "ops"

[mcp_servers.ops]
command = "ops-mcp"
args = ["--stdio"]
env = { OPS_TOKEN = "tok-ops-4f8a9c2e7b1d" }
approval = "read"
approvals = { "restart_*" = "needs approval", "restart_dry_run" = "read" }

[mcp_servers.ci]
url = "https://bot:hunter2pass@ci.example.com/mcp"
headers = { Authorization = "Bearer ci-header-secret-93kd" }
allow = ["list_*", "rerun_job"]

[agents.ops]
[agents.review]
mcp_servers = ["ci"]
mcp_tools = ["ci__list_*"]
[agents.quiet]
mcp_servers = []
"""


def _settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> Settings:
    (tmp_path / "cairn.toml").write_text(text)
    monkeypatch.chdir(tmp_path)
    return load_settings()


def _listed() -> dict[str, list[RemoteTool]]:
    schema = {"type": "object", "properties": {"service": {"type": "string"}}}
    return {
        "ops": [
            RemoteTool("ops", name, "", schema)
            for name in ("service_status", "restart_service", "restart_dry_run")
        ],
        "ci": [RemoteTool("ci", name, "", schema) for name in ("list_jobs", "rerun_job", "wipe")],
    }


def test_servers_and_agents_are_read_from_cairn_toml(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = _settings(tmp_path, monkeypatch, OPS)
    assert s.mcp.servers["ops"].transport == "stdio"
    assert s.mcp.servers["ci"].transport == "http"
    assert s.agent_spec("review").mcp_servers == ["ci"]


def test_server_credentials_are_masked_in_cairn_config_and_redacted_from_logs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = _settings(tmp_path, monkeypatch, OPS)
    shown = json.dumps(s.redacted(), default=str)
    for secret in ("tok-ops-4f8a9c2e7b1d", "ci-header-secret-93kd", "hunter2pass"):
        assert secret not in shown
        assert secret in s.secret_values()
    assert "OPS_TOKEN" in shown  # the names stay, so people see what is set


@pytest.mark.parametrize(
    ("toml", "says"),
    [
        ('[mcp_servers.ops]\ncommand = "x"\napproval = "maybe"\n', "[mcp_servers.ops] approval"),
        ('[mcp_servers.ops]\ncommand = "x"\nurl = "http://h/mcp"\n', "either command"),
        ("[mcp_servers.ops]\n", "[mcp_servers.ops]"),
        ('[mcp_servers.ops]\nurl = "ftp://h/mcp"\n', "http:// or https://"),
        ('[mcp_servers.ops]\ncommand = "x"\nheaders = { A = "b" }\n', "headers are for a url"),
        ('[mcp_servers.ops]\ncommand = "x"\ntimout = 3\n', "[mcp_servers.ops] timout"),
        ('[mcp_servers.Ops__1]\ncommand = "x"\n', "[mcp_servers.Ops__1]"),
        (
            '[mcp_servers.ops]\ncommand = "x"\n[agents.cairn]\nmcp_servers = ["ci"]\n',
            "[agents.cairn] mcp_servers: no MCP server named 'ci'",
        ),
    ],
)
def test_a_malformed_server_declaration_names_the_table_and_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, toml: str, says: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        _settings(tmp_path, monkeypatch, toml)
    assert says in str(raised.value)


def test_exposed_names_follow_the_messages_api_rule_and_never_collide() -> None:
    names = [
        exposed_name("ops", "service_status"),
        exposed_name("ops", "service.status"),
        exposed_name("ops", "service status"),
        exposed_name("ops", "x" * 80),
        exposed_name("ops", "x" * 81),
    ]
    assert names[0] == "ops__service_status"
    assert all(TOOL_NAME.match(n) for n in names), names
    assert len(set(names)) == len(names)


def test_the_most_specific_approval_wins_and_a_tie_needs_approval() -> None:
    spec = McpServerSpec(
        command="x",
        approval="needs approval",
        approvals={"*_status": "read", "restart_*": "needs approval", "restart_dry_run": "read"},
    )
    assert approval_for(spec, "service_status") == "read"
    assert approval_for(spec, "restart_service") == "needs approval"
    assert approval_for(spec, "restart_dry_run") == "read"  # an exact name beats a pattern
    assert approval_for(spec, "wipe") == "needs approval"  # the server's default
    tie = McpServerSpec(
        command="x", approval="read", approvals={"a*": "read", "*b": "needs approval"}
    )
    assert approval_for(tie, "ab") == "needs approval"


def test_an_agent_sees_only_its_servers_and_the_tools_both_allow_lists_let_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = _settings(tmp_path, monkeypatch, OPS)
    ops = {t.exposed: t.approval for t in agent_tools(s, "ops", _listed())}
    assert ops == {
        "ops__service_status": "read",
        "ops__restart_service": "needs approval",
        "ops__restart_dry_run": "read",
        "ci__list_jobs": "needs approval",  # ci's default
        "ci__rerun_job": "needs approval",
    }  # ci__wipe is outside the server's own allow list
    assert [t.exposed for t in agent_tools(s, "review", _listed())] == ["ci__list_jobs"]
    assert agent_tools(s, "quiet", _listed()) == []


def test_a_tool_spec_tells_the_model_which_server_it_is_on_and_that_it_needs_approval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = _settings(tmp_path, monkeypatch, OPS)
    tools = {t.exposed: t.spec for t in agent_tools(s, "ops", _listed())}
    restart = tools["ops__restart_service"]
    assert "needs a person's approval" in restart.description
    assert restart.input_schema["properties"] == {"service": {"type": "string"}}
    assert "approval" not in tools["ops__service_status"].description


def test_secrets_in_tool_arguments_are_masked_at_any_depth() -> None:
    token = "ghp_" + "Zq9XvB2mK7wL4pR8sT1uY6nC3dF5gH0jE2aQ"
    shown, kinds = mask_secrets_in({"service": "payments", "auth": {"tokens": [token]}, "n": 3})
    assert token not in json.dumps(shown)
    assert shown["service"] == "payments"
    assert shown["n"] == 3
    assert kinds == ["GitHub token"]


def _offline(text: str, tools: tuple[ToolSpec, ...]) -> LLMRequest:
    return LLMRequest(
        system="s", messages=(Message.user(f"ann: {text}"),), metadata={"text": text}, tools=tools
    )


TOOLS = (ToolSpec("ops__service_status", "d", {"type": "object"}),)


def test_the_offline_model_runs_the_tool_a_person_names_with_its_json_arguments() -> None:
    response = OfflineLLM().complete(_offline('run ops__service_status {"service": "x"}', TOOLS))
    [use] = response.tool_uses
    assert (use.name, use.input) == ("ops__service_status", {"service": "x"})


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('run ops__restart {"service": "x"}', "no tool named 'ops__restart'"),
        ("run ops__service_status {service: x}", "must be a JSON object"),
        ("run ops__service_status [1, 2]", "must be a JSON object"),
        ("tools", "ops__service_status"),
    ],
)
def test_the_offline_model_answers_a_bad_run_without_calling_anything(text: str, says: str) -> None:
    response = OfflineLLM().complete(_offline(text, TOOLS))
    assert not response.tool_uses
    assert says in response.text


def test_a_question_that_starts_with_run_is_still_a_question() -> None:
    response = OfflineLLM().complete(_offline("run the payments deploy again?", TOOLS))
    [use] = response.tool_uses
    assert use.name == "recall"
