"""Cairn's MCP client against a real MCP server of our own, over stdio and streamable HTTP:
tool lists kept until the server says they changed, calls with a timeout, and a server that
crashes, hangs, cannot start or answers nonsense giving a clear error, never a hang."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cairn.core.settings import McpServerSpec, McpSettings
from cairn.mcp import ServerUnavailable, ToolServers
from tests.support.mcp_server import free_port, read_calls, running_http_server

ROOT = Path(__file__).resolve().parents[2]


def stdio_spec(
    calls: Path, module: str = "tests.support.mcp_server", **extra: object
) -> McpServerSpec:
    """The test server as a stdio command, recording its calls in ``calls``."""
    return McpServerSpec.model_validate(
        {
            "command": sys.executable,
            "args": ["-m", module],
            "env": {"PYTHONPATH": str(ROOT), "CAIRN_TEST_MCP_CALLS": str(calls)},
            "cwd": str(ROOT),
            **extra,
        }
    )


@pytest.fixture(params=["stdio", "http"])
def ops(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[McpServerSpec, Path]]:
    """The test server's declaration (timeout 2s) over each transport, and its call log."""
    calls = tmp_path / "calls.jsonl"
    if request.param == "stdio":
        yield stdio_spec(calls, timeout=2), calls
        return
    with running_http_server(free_port(), {"CAIRN_TEST_MCP_CALLS": str(calls)}) as url:
        yield McpServerSpec(url=url, timeout=2), calls


@pytest.fixture
def hub(ops: tuple[McpServerSpec, Path]) -> Iterator[ToolServers]:
    servers = ToolServers(McpSettings(servers={"ops": ops[0]}, connect_timeout=20))
    yield servers
    servers.close()


def test_a_read_call_returns_what_the_tool_said(hub: ToolServers) -> None:
    result = hub.call("ops", "service_status", {"service": "payments"})
    assert (result.text, result.is_error, result.failure) == (
        "payments: running, 3 replicas",
        False,
        "",
    )


def test_a_tool_error_is_an_error_result_with_the_tools_message(hub: ToolServers) -> None:
    result = hub.call("ops", "service_status", {"service": "billing"})
    assert result.is_error
    assert "no service named 'billing'" in result.text
    assert result.failure == ""  # the tool ran; it said no


def test_tools_are_listed_once_and_again_only_after_the_server_says_they_changed(
    hub: ToolServers,
) -> None:
    first = [t.name for t in hub.tools("ops")]
    assert "service_status" in first
    assert "deploy_status" not in first
    hub.tools("ops")
    hub.call("ops", "service_status", {"service": "payments"})
    assert hub.listings("ops") == 1  # not per turn

    assert not hub.call("ops", "enable_extra", {}).is_error
    deadline = time.monotonic() + 10
    while "deploy_status" not in [t.name for t in hub.tools("ops")]:
        assert time.monotonic() < deadline, "the change was never heard"
        time.sleep(0.05)
    assert hub.listings("ops") == 2
    assert hub.call("ops", "deploy_status", {"service": "payments"}).text.endswith("09:12")


def test_a_call_past_its_timeout_is_abandoned_with_a_clear_error(hub: ToolServers) -> None:
    started = time.monotonic()
    result = hub.call("ops", "slow_task", {"seconds": 30})
    assert time.monotonic() - started < 8
    assert result.failure == "timeout"
    assert "did not answer within 2s" in result.text
    # The connection is still good for the next call.
    assert hub.call("ops", "service_status", {"service": "search"}).text.startswith("search:")


def test_a_server_that_crashes_mid_call_gives_a_clear_error_and_nothing_hangs(
    hub: ToolServers, ops: tuple[McpServerSpec, Path]
) -> None:
    hub.tools("ops")
    started = time.monotonic()
    result = hub.call("ops", "crash", {})
    assert time.monotonic() - started < 8
    assert result.is_error
    assert result.failure == "crashed"
    assert "'ops'" in result.text
    assert [c["tool"] for c in read_calls(ops[1])] == ["crash"]  # it did reach the server
    after = hub.call("ops", "service_status", {"service": "payments"})
    if ops[0].transport == "stdio":
        # A stdio server is Cairn's own child: it is started again for the next call.
        assert after.text == "payments: running, 3 replicas"
        pids = {c["pid"] for c in read_calls(ops[1])}
        assert len(pids) == 2
    else:
        # Nobody restarts a remote server: the next call says it is unavailable, at once.
        assert after.failure == "unavailable"
        assert "'ops'" in after.text


def test_a_server_that_cannot_start_is_named_and_left_alone_for_a_while(tmp_path: Path) -> None:
    servers = ToolServers(
        McpSettings(
            servers={"ghost": McpServerSpec(command=str(tmp_path / "no-such-mcp-server"))},
            retry_after=60,
        )
    )
    try:
        with pytest.raises(ServerUnavailable, match=r"'ghost'.*did not start"):
            servers.tools("ghost")
        started = time.monotonic()
        result = servers.call("ghost", "anything", {})
        assert time.monotonic() - started < 1  # not tried again at every turn
        assert result.failure == "unavailable"
        assert "tried again in" in result.text
        assert servers.listed(["ghost"]) == {}  # a turn goes on without it
    finally:
        servers.close()


def test_a_malformed_result_is_reported_as_such(tmp_path: Path) -> None:
    spec = stdio_spec(tmp_path / "calls.jsonl", "tests.support.mcp_malformed", timeout=5)
    servers = ToolServers(McpSettings(servers={"odd": spec}))
    try:
        assert [t.name for t in servers.tools("odd")] == ["garbled"]
        result = servers.call("odd", "garbled", {})
        assert result.failure == "malformed"
        assert "malformed result" in result.text
    finally:
        servers.close()


def test_closing_stops_the_stdio_servers_it_started(tmp_path: Path) -> None:
    import os

    calls = tmp_path / "calls.jsonl"
    servers = ToolServers(McpSettings(servers={"ops": stdio_spec(calls)}))
    servers.call("ops", "service_status", {"service": "payments"})
    [call] = read_calls(calls)
    pid = int(str(call["pid"]))
    servers.close()
    deadline = time.monotonic() + 10
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        assert time.monotonic() < deadline, "the server outlived close()"
        time.sleep(0.05)


def test_an_http_server_gets_the_declared_headers_and_refuses_without_them(tmp_path: Path) -> None:
    env = {"CAIRN_TEST_MCP_CALLS": str(tmp_path / "calls.jsonl"), "CAIRN_TEST_MCP_TOKEN": "s3cret"}
    with running_http_server(free_port(), env) as url:
        good = McpServerSpec.model_validate(
            {"url": url, "headers": {"Authorization": "Bearer s3cret"}}
        )
        bad = McpServerSpec(url=url)
        servers = ToolServers(McpSettings(servers={"good": good, "bad": bad}, connect_timeout=10))
        try:
            assert "service_status" in [t.name for t in servers.tools("good")]
            with pytest.raises(ServerUnavailable, match="'bad'"):
                servers.tools("bad")
        finally:
            servers.close()
