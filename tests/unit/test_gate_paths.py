"""Every way a text leaves Cairn for storage or a platform passes the gate (cairn.core.gate).

Nothing here is a hand-kept list of write sites. The schema is read from the models: every
column that can hold free text or JSON must be a gated type. Raw SQL that writes is found in
the source and may not set a gated column. The platform clients are found by what they are
(subclasses of slack_sdk's and nio's clients): code may only make Cairn's gated ones, and
Bolt's own senders (``respond``, ``say``) must be handed gated text.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from collections.abc import Iterator
from pathlib import Path

import nio
import slack_sdk
import slack_sdk.webhook
from slack_sdk.web.base_client import BaseClient
from sqlalchemy import JSON, Column, Integer, MetaData, String, Table, Text
from sqlalchemy.types import TypeDecorator
from sqlmodel import SQLModel

import cairn.db.models  # registers every table in SQLModel.metadata
from cairn.bot.matrix.gated import GatedAsyncClient
from cairn.bot.slack.web import GatedWebClient
from cairn.db.types import GatedJSON, GatedText

SOURCE = Path(cairn.db.models.__file__).resolve().parents[1]
GATED_CLIENTS = {GatedWebClient.__name__, GatedAsyncClient.__name__}


def _modules() -> Iterator[tuple[Path, ast.Module]]:
    for path in sorted(SOURCE.rglob("*.py")):
        yield path, ast.parse(path.read_text("utf-8"), str(path))


def _where(path: Path, node: ast.AST) -> str:
    return f"{path.relative_to(SOURCE.parent)}:{getattr(node, 'lineno', 0)}"


def _ungated_columns(metadata: MetaData) -> tuple[int, list[str]]:
    """How many columns of ``metadata`` are gated, and which hold free text or JSON without
    the gate."""
    gated, ungated = 0, []
    for table in metadata.tables.values():
        for column in table.columns:
            kind = column.type
            if isinstance(kind, GatedText | GatedJSON):
                gated += 1
                continue
            if isinstance(kind, TypeDecorator):
                kind = kind.impl_instance
            free = isinstance(kind, Text | JSON) or (
                isinstance(kind, String) and kind.length is None
            )
            if free:
                ungated.append(f"{table.name}.{column.name} ({column.type})")
    return gated, ungated


def test_a_free_text_column_without_the_gate_is_found() -> None:
    planted = MetaData()
    Table(
        "planted",
        planted,
        Column("id", Integer, primary_key=True),
        Column("name", String(40)),
        Column("note", Text),
        Column("blob", JSON),
        Column("body", String),
        Column("kept", GatedText),
    )
    gated, ungated = _ungated_columns(planted)
    assert gated == 1
    assert [u.split(" ")[0] for u in ungated] == ["planted.note", "planted.blob", "planted.body"]


def test_every_free_text_or_json_column_is_gated() -> None:
    gated, ungated = _ungated_columns(SQLModel.metadata)
    assert gated >= 15, "the schema's text and JSON columns were not found"
    assert not ungated, (
        "these columns hold free text or JSON but skip the gate; declare them with "
        f"cairn.db.types.GatedText or GatedJSON (an identifier is a bounded String): {ungated}"
    )


# A statement that writes, and the table it writes to.
_WRITE = re.compile(r"\b(?:INSERT\s+INTO|UPDATE)\s+\"?(\w+)\"?(.*)", re.IGNORECASE | re.DOTALL)


def _gated_columns() -> dict[str, set[str]]:
    return {
        table.name: {c.name for c in table.columns if isinstance(c.type, GatedText | GatedJSON)}
        for table in SQLModel.metadata.tables.values()
    }


def _raw_sql_bypasses(path: Path, module: ast.Module) -> list[str]:
    """Where ``module`` writes a gated column in raw SQL (a string the driver sends as is)."""
    gated, bypasses = _gated_columns(), []
    for node in ast.walk(module):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
            continue
        write = _WRITE.search(node.value)
        if write is None or write.group(1) not in gated:
            continue
        if set(re.findall(r"\w+", write.group(2))) & gated[write.group(1)]:
            bypasses.append(f"{_where(path, node)} writes {write.group(1)} in raw SQL")
    return bypasses


def test_raw_sql_that_sets_a_gated_column_is_found() -> None:
    planted = ast.parse(
        's.exec(text("UPDATE memory SET text = :t WHERE id = :i"))\n'
        's.exec(text("INSERT INTO session_event (seq, data) VALUES (1, :d)"))\n'
        's.exec(text("UPDATE agent_session SET last_seq = last_seq + 1"))\n'
    )
    found = _raw_sql_bypasses(SOURCE / "planted.py", planted)
    assert [f.split(" writes ")[1] for f in found] == [
        "memory in raw SQL",
        "session_event in raw SQL",
    ]


def test_no_raw_sql_sets_a_gated_column() -> None:
    bypasses = []
    for path, module in _modules():
        if "migrations" not in path.parts:  # the schema's history, not a write path
            bypasses += _raw_sql_bypasses(path, module)
    assert not bypasses, f"raw SQL sets a gated column, skipping the gate: {bypasses}"


def _platform_clients() -> set[str]:
    """The names of every client class slack_sdk and nio export: what can post."""
    names = set()
    for module in (slack_sdk, slack_sdk.webhook, importlib.import_module("slack_sdk.web"), nio):
        for name, value in vars(module).items():
            if inspect.isclass(value) and (
                issubclass(value, BaseClient | slack_sdk.webhook.WebhookClient | nio.Client)
            ):
                names.add(name)
    return names


def _imported_names(module: ast.Module, packages: tuple[str, ...]) -> dict[str, str]:
    """Local name -> imported name, for what ``module`` imports from ``packages``."""
    names = {}
    for node in ast.walk(module):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(packages):
            for alias in node.names:
                names[alias.asname or alias.name] = alias.name
    return names


def _client_bypasses(path: Path, module: ast.Module) -> tuple[int, list[str]]:
    """How many gated clients ``module`` makes, and where it makes or subclasses a platform
    client that skips the gate (or a Bolt App without Cairn's client)."""
    clients = _platform_clients()
    imported = _imported_names(module, ("slack_sdk", "nio", "slack_bolt"))
    made, bypasses = 0, []
    for node in ast.walk(module):
        if isinstance(node, ast.ClassDef):
            for base in node.bases:
                name = imported.get(getattr(base, "id", ""), "")
                if name in clients and node.name not in GATED_CLIENTS:
                    bypasses.append(f"{_where(path, node)}: {node.name} subclasses {name}")
        if not isinstance(node, ast.Call):
            continue
        callee = node.func.id if isinstance(node.func, ast.Name) else ""
        if callee in GATED_CLIENTS:
            made += 1
        elif imported.get(callee) in clients:
            bypasses.append(f"{_where(path, node)} makes a {callee} that skips the gate")
        elif imported.get(callee) == "App" and not any(k.arg == "client" for k in node.keywords):
            bypasses.append(f"{_where(path, node)}: a Bolt App without Cairn's client")
    return made, bypasses


def test_a_platform_client_that_skips_the_gate_is_found() -> None:
    planted = ast.parse(
        "from slack_sdk import WebClient\n"
        "from slack_sdk.webhook import WebhookClient as Hook\n"
        "from nio import AsyncClient\n"
        "from slack_bolt import App\n"
        "class Mine(AsyncClient): ...\n"
        "WebClient(token=t)\n"
        "Hook(url)\n"
        "App(token=t)\n"
        "GatedWebClient(token=t)\n"
    )
    made, found = _client_bypasses(SOURCE / "planted.py", planted)
    assert made == 1
    assert len(found) == 4, found


def test_only_gated_platform_clients_are_made() -> None:
    assert {"WebClient", "WebhookClient", "AsyncClient"} <= _platform_clients()
    made, bypasses = 0, []
    for path, module in _modules():
        count, found = _client_bypasses(path, module)
        made += count
        bypasses += found
    assert made >= 3, "the gated clients' constructions were not found"
    assert not bypasses, bypasses


def test_bolt_senders_get_gated_text() -> None:
    """``respond`` and ``say`` post through a webhook or Bolt's own path: their text is gated
    at the call."""
    calls, bypasses = 0, []
    for path, module in _modules():
        if "slack" not in path.parts:
            continue
        for node in ast.walk(module):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
                continue
            if node.func.id not in {"respond", "say"}:
                continue
            calls += 1
            texts = [k.value for k in node.keywords if k.arg in {"text", "blocks"}]
            texts += node.args[:1]
            for text in texts:
                if not (isinstance(text, ast.Call) and getattr(text.func, "id", "") == "gated"):
                    bypasses.append(f"{_where(path, node)}: {node.func.id} without gated()")
    assert calls >= 1, "Bolt's respond was not found"
    assert not bypasses, bypasses
