"""This process's connections to the declared MCP servers, through the official ``mcp`` SDK.

:class:`ToolServers` keeps one connection per server, opened on first use: a stdio server is
spawned as a subprocess, a streamable HTTP server is reached at its URL with its headers. The
SDK is asynchronous and Cairn's workers are threads, so the connections live on one event loop
in a daemon thread, and the sync methods hand it coroutines and wait with a deadline.

A server's tool list is fetched once and kept; it is fetched again only after the server says
it changed (``notifications/tools/list_changed``, or a ``subscriptions/listen`` event on a
2026-07-28 connection), or after the connection was lost. A call has a timeout; a server that
crashes, hangs or answers with something malformed gives a :class:`CallResult` with a clear
error text, never an exception and never a wait past the timeout. A server that fails to start
is left alone for ``retry_after`` seconds, so turns are not slowed by a dead server.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import os
import threading
import time
from collections.abc import Coroutine, Iterable, Mapping
from contextlib import AsyncExitStack, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TextIO, TypeVar

import anyio
import httpx2
import mcp_types
from mcp import Client, StdioServerParameters, stdio_client
from mcp.client.session import IncomingMessage
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from cairn.core.errors import CairnError
from cairn.core.injection import instruction_reason
from cairn.core.secrets import mask_secrets
from cairn.core.settings import McpServerSpec, McpSettings
from cairn.mcp.catalog import RemoteTool

__all__ = ["CallResult", "Failure", "ServerUnavailable", "ToolServers"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")

Failure = Literal["", "refused", "timeout", "crashed", "unavailable", "malformed"]

# Pages of a tool list read at most (a server that pages forever is cut off there).
_MAX_PAGES = 20
# Seconds the sync side waits beyond a coroutine's own deadline before giving up on it.
_GRACE = 5.0


class ServerUnavailable(CairnError):
    """An MCP server could not be started, reached or listed; the message names it and why."""


@dataclass(frozen=True, slots=True)
class CallResult:
    """What a tool call gave: its text (the tool's output, or what went wrong), whether it is an
    error, and which kind of failure (``""`` for a tool that ran, even with an error result)."""

    text: str
    is_error: bool = False
    failure: Failure = ""
    seconds: float = 0.0


@dataclass(eq=False)
class _Link:
    """One server's connection and what is known of it."""

    name: str
    spec: McpServerSpec
    client: Client | None = None
    tools: tuple[RemoteTool, ...] | None = None
    stale: bool = False
    failed_at: float = 0.0
    failure: str = ""
    listings: int = 0
    stop: asyncio.Event | None = None
    runner: asyncio.Task[None] | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class ToolServers:
    """The declared MCP servers of this process; thread-safe; :meth:`close` when done."""

    def __init__(self, settings: McpSettings, *, logs: Path | None = None) -> None:
        """``logs`` is a folder for each stdio server's standard error (``NAME.log``); None
        discards it."""
        self.settings = settings
        self.logs = logs
        self._links = {name: _Link(name, spec) for name, spec in settings.servers.items()}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._errlogs: dict[str, TextIO] = {}

    @property
    def names(self) -> list[str]:
        """The declared servers, in declaration order."""
        return list(self._links)

    def spec(self, server: str) -> McpServerSpec:
        """The declaration of ``server`` (KeyError when there is none)."""
        return self._links[server].spec

    def listings(self, server: str) -> int:
        """How many times the tool list of ``server`` was fetched from it (tests, telemetry)."""
        return self._links[server].listings

    # --- the sync side -----------------------------------------------------------------

    def tools(self, server: str) -> tuple[RemoteTool, ...]:
        """The tools ``server`` lists, fetched on first use and after a change.

        Raises ServerUnavailable (naming the server and the cause) when it cannot be started,
        reached or listed, and for ``retry_after`` seconds after such a failure.
        """
        link = self._links[server]
        try:
            return self._wait(self._tools(link), self.settings.connect_timeout * 2)
        except TimeoutError:
            raise ServerUnavailable(
                f"MCP server {server!r} ({link.spec.where}) did not list its tools in time"
            ) from None

    def listed(self, servers: Iterable[str]) -> dict[str, tuple[RemoteTool, ...]]:
        """The tools of each of ``servers`` that answers; one that does not is left out (and
        logged), so that a turn goes on without it."""
        found: dict[str, tuple[RemoteTool, ...]] = {}
        for server in servers:
            if server not in self._links:
                continue
            try:
                found[server] = self.tools(server)
            except ServerUnavailable as exc:
                log.warning("%s", exc)
        return found

    def call(self, server: str, tool: str, arguments: Mapping[str, Any]) -> CallResult:
        """Call ``tool`` on ``server`` with ``arguments``; never raises for the server's faults.

        A call that outlives the server's timeout (CAIRN_MCP_CALL_TIMEOUT unless the server
        declares its own) is abandoned, and the result says so.
        """
        link = self._links[server]
        timeout = link.spec.timeout or self.settings.call_timeout
        log.info(
            "MCP call %s.%s %s", server, tool, mask_secrets(json.dumps(arguments, default=str))[0]
        )
        started = time.monotonic()
        try:
            result = self._wait(
                self._call(link, tool, dict(arguments), timeout),
                timeout + self.settings.connect_timeout,
            )
        except ServerUnavailable as exc:
            result = CallResult(str(exc), is_error=True, failure="unavailable")
        except TimeoutError:
            result = _timed_out(server, tool, timeout)
        result = CallResult(
            result.text, result.is_error, result.failure, time.monotonic() - started
        )
        log.info(
            "MCP result %s.%s in %.2fs%s: %s",
            server,
            tool,
            result.seconds,
            f" ({result.failure or 'error'})" if result.is_error else "",
            mask_secrets(result.text[:500])[0],
        )
        return result

    def close(self) -> None:
        """Stop every server this process started and the event loop; idempotent."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        with suppress(Exception):
            asyncio.run_coroutine_threadsafe(self._close_all(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)
        self._loop = self._thread = None
        for errlog in self._errlogs.values():
            errlog.close()
        self._errlogs.clear()
        for link in self._links.values():
            link.lock = asyncio.Lock()  # the next loop, should this be used again, has its own

    def _wait(self, coro: Coroutine[Any, Any, _T], deadline: float) -> _T:
        """Run ``coro`` on the servers' loop and wait at most ``deadline`` (+ a grace)."""
        future = asyncio.run_coroutine_threadsafe(coro, self._running_loop())
        try:
            return future.result(deadline + _GRACE)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError from None

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        with self._start_lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="cairn-mcp", daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    # --- the loop's side ---------------------------------------------------------------

    async def _tools(self, link: _Link) -> tuple[RemoteTool, ...]:
        client = await self._connected(link)
        if link.tools is not None and not link.stale:
            return link.tools
        link.stale = False
        try:
            with anyio.fail_after(self.settings.connect_timeout):
                link.tools = await _list_tools(link.name, client)
        except Exception as exc:
            await self._drop(link)
            raise self._failed(link, f"did not list its tools: {_describe(exc)}") from None
        link.listings += 1
        for tool in link.tools:
            reason = instruction_reason(tool.description)
            if reason is not None:
                # The description reaches the model's tool list: operators should know.
                log.warning(
                    "MCP server %r: the description of %s reads like an instruction (%s)",
                    link.name,
                    tool.name,
                    reason,
                )
        return link.tools

    async def _call(
        self, link: _Link, tool: str, arguments: dict[str, Any], timeout: float
    ) -> CallResult:
        client = await self._connected(link)
        name = link.name
        try:
            with anyio.fail_after(timeout):
                result = await client.call_tool(tool, arguments)
        except TimeoutError:
            return _timed_out(name, tool, timeout)
        except MCPError as exc:
            if exc.code == mcp_types.CONNECTION_CLOSED:
                await self._drop(link)
                return CallResult(
                    f"the MCP server {name!r} closed the connection during the call to {tool} "
                    "(it may have crashed); the call's outcome is unknown. The server is started "
                    "again on the next call.",
                    is_error=True,
                    failure="crashed",
                )
            return CallResult(
                f"the MCP server {name!r} refused the call to {tool}: {exc.message}",
                is_error=True,
                failure="refused",
            )
        except (ValidationError, RuntimeError, TypeError, ValueError) as exc:
            return CallResult(
                f"the MCP server {name!r} answered the call to {tool} with a malformed result "
                f"({_describe(exc)[:300]})",
                is_error=True,
                failure="malformed",
            )
        except Exception as exc:
            await self._drop(link)
            return CallResult(
                f"the connection to the MCP server {name!r} failed during the call to {tool}: "
                f"{_describe(exc)}; the call's outcome is unknown",
                is_error=True,
                failure="crashed",
            )
        if not isinstance(result, mcp_types.CallToolResult):
            return CallResult(
                f"the MCP server {name!r} answered the call to {tool} with a result Cairn cannot "
                "read",
                is_error=True,
                failure="malformed",
            )
        return CallResult(output_text(result), is_error=bool(result.is_error))

    async def _connected(self, link: _Link) -> Client:
        """The server's client, starting the server when it is not running."""
        async with link.lock:
            if link.client is not None and link.runner is not None and not link.runner.done():
                return link.client
            since = time.monotonic() - link.failed_at
            if link.failed_at and since < self.settings.retry_after:
                raise ServerUnavailable(
                    f"MCP server {link.name!r} is unavailable ({link.failure}); "
                    f"it is tried again in {self.settings.retry_after - since:.0f}s"
                )
            loop = asyncio.get_running_loop()
            ready: asyncio.Future[Client] = loop.create_future()
            link.stop = asyncio.Event()
            link.runner = loop.create_task(self._run(link, ready), name=f"mcp-{link.name}")
            try:
                client = await asyncio.wait_for(
                    asyncio.shield(ready), self.settings.connect_timeout
                )
            except TimeoutError:
                await self._drop(link)
                raise self._failed(
                    link, f"did not start within {self.settings.connect_timeout:g}s"
                ) from None
            except ServerUnavailable as exc:
                await self._drop(link)
                raise self._failed(link, str(exc)) from None
            link.failed_at, link.failure = 0.0, ""
            link.tools = None  # a new connection: list again
            return client

    def _failed(self, link: _Link, why: str) -> ServerUnavailable:
        link.failed_at, link.failure = time.monotonic(), why
        return ServerUnavailable(f"MCP server {link.name!r} ({link.spec.where}) {why}")

    async def _run(self, link: _Link, ready: asyncio.Future[Client]) -> None:
        """Hold the server's connection open until told to stop (or until it fails)."""
        assert link.stop is not None
        try:
            async with AsyncExitStack() as stack:
                client = await stack.enter_async_context(self._client(link, stack))
                link.client = client
                async with anyio.create_task_group() as group:
                    if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
                        group.start_soon(self._listen, link, client)
                    if not ready.done():
                        ready.set_result(client)
                    await link.stop.wait()
                    group.cancel_scope.cancel()
        except Exception as exc:
            if not ready.done():
                ready.set_exception(ServerUnavailable(f"did not start: {_describe(exc)}"))
            else:
                log.warning("MCP server %r: connection ended: %s", link.name, _describe(exc))
        finally:
            link.client = None
            if not ready.done():
                ready.set_exception(ServerUnavailable("did not start"))

    def _client(self, link: _Link, stack: AsyncExitStack) -> Client:
        """A client for the server; what it needs closed besides (an HTTP client) goes on
        ``stack``."""
        spec = link.spec

        async def on_message(message: IncomingMessage) -> None:
            if isinstance(message, mcp_types.ToolListChangedNotification):
                link.stale = True
            elif isinstance(message, Exception):
                log.warning("MCP server %r: %s", link.name, _describe(message))

        if spec.command is not None:
            params = StdioServerParameters(
                command=spec.command,
                args=list(spec.args),
                env={k: v.get_secret_value() for k, v in spec.env.items()} or None,
                cwd=spec.cwd,
            )
            transport = stdio_client(params, errlog=self._errlog(link.name))
        else:
            assert spec.url is not None
            headers = {k: v.get_secret_value() for k, v in spec.headers.items()}
            http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=300.0))
            stack.push_async_callback(http.aclose)  # the transport leaves a given client open
            transport = streamable_http_client(spec.url, http_client=http)
        return Client(
            transport,
            message_handler=on_message,
            cache=None,  # the tool list is kept here, and refreshed on change
            client_info=mcp_types.Implementation(name="cairn", version="1"),
        )

    async def _listen(self, link: _Link, client: Client) -> None:
        """On a 2026-07-28 connection, ask for tool list changes (they also reach on_message)."""
        try:
            async with client.listen(tools_list_changed=True) as changes:
                async for _ in changes:
                    link.stale = True
        except Exception as exc:
            log.info("MCP server %r: no tool list changes heard: %s", link.name, _describe(exc))

    def _errlog(self, server: str) -> TextIO:
        """Where the stdio server's standard error goes: one file per server, kept open."""
        if server not in self._errlogs:
            if self.logs is None:
                self._errlogs[server] = open(os.devnull, "w")  # noqa: SIM115 - closed in close()
            else:
                self.logs.mkdir(parents=True, exist_ok=True)
                self._errlogs[server] = (self.logs / f"{server}.log").open("a", encoding="utf-8")
        return self._errlogs[server]

    async def _drop(self, link: _Link) -> None:
        """End the server's connection (a stdio server's process with it)."""
        runner, stop = link.runner, link.stop
        link.client, link.tools, link.runner = None, None, None
        if stop is not None:
            stop.set()
        if runner is not None and not runner.done():
            try:
                await asyncio.wait_for(asyncio.shield(runner), 5.0)
            except (TimeoutError, Exception):
                runner.cancel()

    async def _close_all(self) -> None:
        for link in self._links.values():
            await self._drop(link)


async def _list_tools(server: str, client: Client) -> tuple[RemoteTool, ...]:
    tools: list[RemoteTool] = []
    cursor: str | None = None
    for _ in range(_MAX_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools.extend(
            RemoteTool(server, t.name, t.description or "", dict(t.input_schema or {}))
            for t in page.tools
        )
        cursor = page.next_cursor
        if cursor is None:
            break
    return tuple(tools)


def output_text(result: mcp_types.CallToolResult) -> str:
    """A tool result's content as text: text blocks as they are, other blocks named, and the
    structured content as JSON when there is no text."""
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, mcp_types.TextContent):
            parts.append(block.text)
        elif isinstance(block, mcp_types.EmbeddedResource):
            resource = block.resource
            if isinstance(resource, mcp_types.TextResourceContents):
                parts.append(resource.text)
            else:
                parts.append(f"[binary resource {resource.uri}, not shown]")
        elif isinstance(block, mcp_types.ResourceLink):
            parts.append(f"[resource {block.uri}]")
        else:
            parts.append(f"[{block.type} content, not shown]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(parts) if parts else "(no output)"


def _timed_out(server: str, tool: str, timeout: float) -> CallResult:
    return CallResult(
        f"{tool} on the MCP server {server!r} did not answer within {timeout:g}s; the call was "
        "abandoned (it may still finish on the server)",
        is_error=True,
        failure="timeout",
    )


def _describe(exc: BaseException) -> str:
    """One line for ``exc``, looking inside exception groups for the first real cause."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, MCPError):
        return exc.message
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
