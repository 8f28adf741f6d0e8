"""``cairn doctor``: check every configured part for real and say what to fix.

Each check talks to the real thing (database, Redis, Qdrant, the LLM API, Slack, Matrix and its
end-to-end encryption keys) with a short timeout and reports ok, warn or fail with an actionable
hint. Nothing is changed. No line of the report shows a password or token written in a URL. A
detail may run over several lines.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from cairn.core.redact import mask_urls
from cairn.core.settings import Settings, config_file

if TYPE_CHECKING:
    from cairn.bot.matrix.store import CryptoStore, StoreKeys

__all__ = ["Check", "run_checks"]

Status = Literal["ok", "warn", "fail", "skip"]


@dataclass(frozen=True, slots=True)
class Check:
    """One line of the report."""

    name: str
    status: Status
    detail: str
    fix: str = ""


def run_checks(settings: Settings) -> list[Check]:
    """Run every check that applies to ``settings``, in a fixed order; never raises.

    Every detail and hint has the credentials of any URL in it masked, whatever wrote it (a
    library's error message may quote the URL it was given).
    """
    checks: list[Callable[[Settings], Check]] = [
        _config,
        _disk,
        _database,
        _redis,
        _workers,
        _vectors,
        _llm,
        _slack,
        _matrix,
        _matrix_e2e,
    ]
    results = []
    for check in checks:
        try:
            result = check(settings)
        except Exception as exc:  # a check must report, never crash the report
            name = check.__name__.strip("_").replace("_", "-")
            result = Check(name, "fail", f"{type(exc).__name__}: {exc}")
        results.append(replace(result, detail=mask_urls(result.detail), fix=mask_urls(result.fix)))
    try:
        more = _mcp(settings)
    except Exception as exc:  # a check must report, never crash the report
        more = [Check("mcp", "fail", f"{type(exc).__name__}: {exc}")]
    results.extend(replace(c, detail=mask_urls(c.detail), fix=mask_urls(c.fix)) for c in more)
    return results


def _config(settings: Settings) -> Check:
    source = config_file()
    where = f"environment + {source}" if source else "environment (no cairn.toml)"
    return Check("config", "ok", f"read from {where}; data in {settings.home_dir}")


def _disk(settings: Settings) -> Check:
    from cairn.core.disk import DiskFull, check_start

    try:
        space = check_start(
            settings.home_dir, settings.min_free_mb, embedded_index=not settings.qdrant_url
        )
    except DiskFull as exc:
        return Check("disk", "fail", str(exc), "free space under CAIRN_HOME or move it")
    return Check("disk", "ok", space.describe())


def _database(settings: Settings) -> Check:
    from cairn.core.errors import StorageError
    from cairn.db import Database

    db = Database(settings.effective_database_url)
    try:
        current, head = db.current_revision(), db.head_revision()
    except StorageError as exc:
        return Check("database", "fail", str(exc), "start the database or fix CAIRN_DATABASE_URL")
    finally:
        db.dispose()
    if current is None and db.is_sqlite:
        # Every other command creates the embedded database's schema on first use: a fresh
        # CAIRN_HOME is how everyone starts, not a fault.
        return Check(
            "database",
            "ok",
            f"{db.safe_url} is new; its schema is created on first use",
            "or now, with `cairn migrate`",
        )
    if current is None:
        # A server database is shared and set up on purpose: an empty one may be the wrong one.
        return Check(
            "database",
            "warn",
            f"{db.safe_url} is empty (no Cairn schema yet)",
            "if this is Cairn's database, run `cairn migrate`",
        )
    if current != head:
        return Check(
            "database",
            "fail",
            f"{db.safe_url} is at schema {current}, this Cairn needs {head}",
            "run `cairn migrate`",
        )
    return Check("database", "ok", f"{db.safe_url}, schema {current}")


def _redis(settings: Settings) -> Check:
    url = settings.effective_redis_url
    if not url:
        return Check("redis", "skip", "not configured (in-process locks and dedupe)")
    import redis

    client = redis.Redis.from_url(url, socket_connect_timeout=3, socket_timeout=3)
    try:
        info = client.info("server")
    except redis.RedisError as exc:
        var = "CAIRN_REDIS_URL" if settings.redis_url else "CAIRN_BROKER_URL"
        return Check("redis", "fail", f"{url}: {exc}", f"start Redis or fix {var}")
    finally:
        client.close()
    return Check("redis", "ok", f"{url}, Redis {info.get('redis_version', '?')}")


def _workers(settings: Settings) -> Check:
    if not settings.broker_url:
        return Check("workers", "skip", "no broker: messages are handled in-process")
    from cairn.workers.celery_app import configure_celery

    replies = configure_celery(settings).control.ping(timeout=2.0) or []
    if not replies:
        return Check(
            "workers",
            "warn",
            "no Celery worker answered on the broker",
            "start one with `cairn worker` (messages wait in the queue until then)",
        )
    names = sorted(name for reply in replies for name in reply)
    return Check("workers", "ok", f"{len(names)} worker(s): {', '.join(names)}; {_beat(settings)}")


def _beat(settings: Settings) -> str:
    """Which beat schedules the periodic jobs (ADR 0018), in words."""
    import redis

    from cairn.workers.beat import scheduler_holder

    assert settings.broker_url is not None
    try:
        with redis.Redis.from_url(settings.broker_url, socket_timeout=2.0) as client:
            holder = scheduler_holder(client)
    except redis.RedisError as exc:
        return f"the periodic jobs' scheduler is unknown ({type(exc).__name__})"
    if holder is None:
        return "no beat schedules the periodic jobs (run one worker with --beat)"
    return f"periodic jobs scheduled by the beat {holder}"


def _vectors(settings: Settings) -> Check:
    from cairn.core.disk import DiskFull, check_start
    from cairn.core.errors import ConfigError

    if not settings.qdrant_url:
        try:  # opening the embedded index on a full disk dies of SIGBUS: look first
            check_start(settings.home_dir, settings.min_free_mb, embedded_index=True)
        except DiskFull:
            return Check("vectors", "skip", "not opened: the disk check failed (see above)")
    from cairn.memory.embed import build_embedder
    from cairn.memory.index import IndexUnavailable, index_for

    try:
        embedder = build_embedder(settings.memory.embeddings, settings.memory.embedding_engine)
    except ConfigError as exc:
        return Check("vectors", "fail", str(exc), "install the model or fix CAIRN_EMBEDDINGS")
    model = f"embeddings {embedder.name}" if embedder else "no embedding model: lexical search"
    index = index_for(settings, embedder.dim if embedder else None)
    where = f"{settings.qdrant_url or settings.qdrant_path}, {model}"
    try:
        index.search("doctor", "doctor-check", "doctor", 1)
    except IndexUnavailable as exc:
        hint = (
            "start Qdrant or fix CAIRN_QDRANT_URL"
            if settings.qdrant_url
            else "another Cairn process may hold the local folder; stop it or set CAIRN_QDRANT_URL"
        )
        return Check("vectors", "warn", f"{exc} (recall falls back to lexical search)", hint)
    finally:
        index.close()
    return Check("vectors", "ok", f"Qdrant at {where}")


def _llm(settings: Settings) -> Check:
    if settings.llm.provider == "offline":
        return Check(
            "llm",
            "warn",
            "no ANTHROPIC_API_KEY: the offline model answers from memory only",
            "set ANTHROPIC_API_KEY for full answers, or CAIRN_LLM=openai with OPENAI_BASE_URL",
        )
    if settings.llm.provider == "openai":
        from cairn.commands.doctor_openai import openai_check

        status, detail, fix = openai_check(settings)
        return Check("llm", status, detail, fix)
    import anthropic

    assert settings.llm.anthropic_api_key is not None
    client = anthropic.Anthropic(
        api_key=settings.llm.anthropic_api_key.get_secret_value(),
        base_url=settings.llm.anthropic_base_url or "https://api.anthropic.com",
        max_retries=0,
        timeout=10.0,
    )
    try:
        model = client.models.retrieve(settings.llm.model)
    except anthropic.AuthenticationError:
        return Check("llm", "fail", "the API rejected ANTHROPIC_API_KEY", "set a valid key")
    except anthropic.NotFoundError:
        return Check("llm", "fail", f"model {settings.llm.model!r} not found", "fix CAIRN_MODEL")
    except anthropic.APIError as exc:
        return Check(
            "llm",
            "fail",
            f"cannot reach the Anthropic API: {exc}",
            "check the network or ANTHROPIC_BASE_URL",
        )
    finally:
        client.close()
    return Check("llm", "ok", f"Anthropic, model {model.id}")


def _mcp(settings: Settings) -> list[Check]:
    """One check per declared MCP server: it starts (or answers) and lists its tools."""
    if not settings.mcp.servers:
        return [Check("mcp", "skip", "no MCP servers declared")]
    from cairn.mcp import ServerUnavailable, ToolServers

    hub = ToolServers(settings.mcp, logs=settings.home_dir / "mcp")
    checks = []
    try:
        for name, spec in settings.mcp.servers.items():
            try:
                found = hub.tools(name)
            except ServerUnavailable as exc:
                hint = (
                    f"check [mcp_servers.{name}] command, args, env and cwd in cairn.toml "
                    f"(its errors are in {settings.home_dir / 'mcp' / (name + '.log')})"
                    if spec.transport == "stdio"
                    else f"start the server or fix [mcp_servers.{name}] url and headers"
                )
                checks.append(Check(f"mcp {name}", "fail", str(exc), hint))
                continue
            names = ", ".join(t.name for t in found[:12]) + (", ..." if len(found) > 12 else "")
            checks.append(Check(f"mcp {name}", "ok", f"{spec.where}: {len(found)} tools ({names})"))
    finally:
        hub.close()
    return checks


def _get_json(url: str, headers: dict[str, str], *, data: bytes | None = None) -> Any:
    request = urllib.request.Request(url, headers=headers, data=data)  # noqa: S310
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
        return json.load(response)


def _slack(settings: Settings) -> Check:
    if settings.slack.bot_token is None:
        return Check("slack", "skip", "not configured")
    url = settings.slack.api_url.rstrip("/") + "/auth.test"
    token = settings.slack.bot_token.get_secret_value()
    try:
        answer = _get_json(url, {"Authorization": f"Bearer {token}"}, data=b"")
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return Check("slack", "fail", f"cannot reach {url}: {exc}", "check SLACK_API_URL")
    if not answer.get("ok"):
        return Check(
            "slack",
            "fail",
            f"auth.test said {answer.get('error')}",
            "reinstall the app and set SLACK_BOT_TOKEN",
        )
    mode = "Socket Mode" if settings.slack.app_token else "HTTP events"
    return Check("slack", "ok", f"workspace {answer.get('team')} as {answer.get('user')}, {mode}")


def _matrix(settings: Settings) -> Check:
    if not settings.matrix.homeserver:
        return Check("matrix", "skip", "not configured")
    base = settings.matrix.homeserver.rstrip("/")
    try:
        versions = _get_json(f"{base}/_matrix/client/versions", {})
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return Check("matrix", "fail", f"cannot reach {base}: {exc}", "check MATRIX_HOMESERVER")
    if settings.matrix.access_token is None:
        return Check(
            "matrix",
            "ok",
            f"{base} answers (versions {versions.get('versions', [])[-1:]});"
            " the password login is tried at start",
        )
    token = settings.matrix.access_token.get_secret_value()
    try:
        who = _get_json(
            f"{base}/_matrix/client/v3/account/whoami", {"Authorization": f"Bearer {token}"}
        )
    except urllib.error.HTTPError as exc:
        return Check(
            "matrix",
            "fail",
            f"whoami refused the token ({exc.code})",
            "set a valid MATRIX_ACCESS_TOKEN or use MATRIX_PASSWORD",
        )
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return Check("matrix", "fail", f"whoami failed: {exc}", "check MATRIX_HOMESERVER")
    if who.get("user_id") != settings.matrix.user_id:
        return Check(
            "matrix",
            "fail",
            f"the token belongs to {who.get('user_id')}, not {settings.matrix.user_id}",
            "fix MATRIX_USER_ID or MATRIX_ACCESS_TOKEN",
        )
    return Check("matrix", "ok", f"{base} as {who['user_id']}")


_E2E = "matrix-e2e"


class _NotAsked(Exception):
    """The homeserver could not be asked; the message says why, in words for the report."""


@dataclass(frozen=True, slots=True)
class _Homeserver:
    """The client-server API as the E2E check uses it: one access token, named for messages."""

    base: str
    token: str
    token_name: str

    def call(self, path: str, body: dict[str, Any] | None = None) -> Any:
        """GET ``path`` (POST ``body`` when given). Raises _NotAsked."""
        headers = {"Authorization": f"Bearer {self.token}"}
        data = None
        if body is not None:
            headers["Content-Type"] = "application/json"
            data = json.dumps(body).encode()
        try:
            return _get_json(f"{self.base}/_matrix/client/v3/{path}", headers, data=data)
        except urllib.error.HTTPError as exc:
            if exc.code in {401, 403}:
                raise _NotAsked(f"the homeserver refused {self.token_name} ({exc.code})") from exc
            raise _NotAsked(f"{path} answered {exc.code} {exc.reason}") from exc
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise _NotAsked(f"cannot reach {self.base}: {exc}") from exc


@dataclass(frozen=True, slots=True)
class _Published:
    """What the homeserver publishes for the bot's device: its identity keys, if any, and how
    many one-time keys it has left to hand out."""

    ed25519: str | None
    curve25519: str | None
    one_time_keys: int


def _published(server: _Homeserver, user_id: str, device_id: str) -> _Published:
    """Ask the homeserver for the device's keys (``keys/query``) and one-time key count (an
    empty ``keys/upload``, which uploads nothing). Raises _NotAsked."""
    query = {"device_keys": {user_id: [device_id]}}
    answer = server.call("keys/query", query)
    device = answer.get("device_keys", {}).get(user_id, {}).get(device_id) or {}
    keys = device.get("keys", {})
    counts = server.call("keys/upload", {}).get("one_time_key_counts", {})
    return _Published(
        keys.get(f"ed25519:{device_id}"),
        keys.get(f"curve25519:{device_id}"),
        int(counts.get("signed_curve25519", 0)),
    )


def _fingerprint(ed25519: str) -> str:
    """An ed25519 key in groups of four, as Element shows a session key to compare."""
    return " ".join(ed25519[i : i + 4] for i in range(0, len(ed25519), 4))


def _matrix_e2e(settings: Settings) -> Check:
    """The Matrix device's end-to-end encryption keys: in the store, and on the homeserver."""
    matrix = settings.matrix
    if not (matrix.homeserver and matrix.user_id):
        return Check(_E2E, "skip", "not configured")
    if not matrix.encryption:
        return Check(
            _E2E,
            "warn",
            "off (CAIRN_MATRIX_ENCRYPTION=false): encrypted rooms and DMs are told the bot"
            " cannot read them",
            "unset CAIRN_MATRIX_ENCRYPTION to read them",
        )
    from nio.crypto import ENCRYPTION_ENABLED

    from cairn.bot.matrix.store import CryptoStore
    from cairn.bot.matrix.sync_state import StateFile
    from cairn.core.errors import StorageError

    if not ENCRYPTION_ENABLED:
        return Check(
            _E2E,
            "fail",
            "encryption is on, but matrix-nio's e2e support (vodozemac) is missing here",
            "pip install 'matrix-nio[e2e]' (or reinstall cairn-bot), or set"
            " CAIRN_MATRIX_ENCRYPTION=false",
        )
    base = matrix.homeserver.rstrip("/")
    state_file = StateFile(settings.home_dir / "matrix", matrix.user_id)
    state = state_file.load(base, matrix.user_id)
    saved = next((p for p in (state_file.path, state_file.legacy) if p.exists()), state_file.path)
    store = CryptoStore(matrix.store_dir(settings.home_dir), matrix.user_id)
    if matrix.access_token is not None:
        server = _Homeserver(base, matrix.access_token.get_secret_value(), "MATRIX_ACCESS_TOKEN")
        new_device = "log in as a new device: set MATRIX_ACCESS_TOKEN to a new login's token"
    else:
        server = _Homeserver(base, state.access_token, f"the access token saved in {saved}")
        new_device = (
            f"log in as a new device: delete {saved} (the frontend then logs in with"
            " MATRIX_PASSWORD)"
        )
    device, whence = _device(server if matrix.access_token else None, state.device_id, saved)
    if not device:
        return Check(
            _E2E,
            "warn",
            f"no device yet; its keys will be kept in {store.folder}",
            "start the Matrix frontend once to log in and create the device's keys",
        )
    lines = [f"device {device} of {matrix.user_id} ({whence})", _store_line(store, device)]
    try:
        keys = store.keys_summary(device)
    except StorageError as exc:
        return Check(
            _E2E,
            "fail",
            "\n".join([*lines, str(exc)]),
            f"if the store is damaged, move it aside and {new_device}",
        )
    published: _Published | None = None
    if server.token:
        try:
            published = _published(server, matrix.user_id, device)
        except _NotAsked as exc:
            lines.append(f"not compared with the homeserver: {exc}")
    else:
        lines.append("not compared with the homeserver: no access token known")
    if keys is not None:
        lines.extend(_keys_lines(keys, len(matrix.blocked)))
    if state.undecrypted:
        lines.append(f"messages waiting for their room keys: {len(state.undecrypted)}")
    status, line, fix = _e2e_verdict(keys, published, device, store.database(device), new_device)
    return Check(_E2E, status, "\n".join([*lines, line] if line else lines), fix)


def _device(server: _Homeserver | None, saved_device: str, saved: Path) -> tuple[str, str]:
    """The bot's device id and where it came from: whoami when MATRIX_ACCESS_TOKEN is given
    (``server``), else the state file."""
    if server is not None:
        try:
            device = str(server.call("account/whoami").get("device_id") or "")
        except _NotAsked as exc:
            return saved_device, f"saved in {saved}; whoami failed: {exc}"
        if device:
            return device, "whoami of MATRIX_ACCESS_TOKEN"
    return saved_device, f"saved in {saved}"


def _store_line(store: CryptoStore, device: str) -> str:
    database = store.database(device)
    exists = "" if database.is_file() else " (missing)"
    holder = store.holder()
    lock = f"held by pid {holder}" if holder else "no frontend holds it"
    return f"store {database}{exists}; lock {store.lock_path.name}: {lock}"


def _keys_lines(keys: StoreKeys, blocked: int) -> list[str]:
    devices = (
        f"tracked devices: {keys.devices} ({keys.verified} verified, {keys.blacklisted} "
        f"blacklisted, {keys.ignored} ignored)"
    )
    if blocked:
        devices += f"; CAIRN_MATRIX_BLOCKED_DEVICES names {blocked}"
    return [
        f"ed25519 fingerprint {_fingerprint(keys.ed25519)}; curve25519 {keys.curve25519}",
        f"Megolm (room) sessions: {keys.megolm_sessions}, Olm sessions: {keys.olm_sessions}; "
        + devices,
    ]


def _e2e_verdict(
    keys: StoreKeys | None,
    published: _Published | None,
    device: str,
    database: Path,
    new_device: str,
) -> tuple[Status, str, str]:
    """The status, the last line and the fix of the E2E check, from what the store holds
    (``keys``) and what the homeserver publishes (``published``, None when not asked)."""
    if keys is None:
        if published is not None and published.ed25519:
            return (
                "fail",
                f"the store has no keys for device {device}, but the homeserver has"
                f" (ed25519 {_fingerprint(published.ed25519)}): the store was deleted or moved",
                f"point CAIRN_MATRIX_STORE at the store that has them, or {new_device}",
            )
        # Nothing lost yet: neither side has keys (or the homeserver could not say).
        return (
            "warn",
            f"the store has no keys for device {device}: the bot cannot read encrypted rooms",
            "start the Matrix frontend once to create the device's keys",
        )
    if published is None:
        return "warn", "", ""
    if published.ed25519 is None:
        if keys.uploaded:
            return (
                "fail",
                f"the homeserver has no keys for device {device}, though the store has uploaded"
                " them: the device was logged out or deleted",
                f"move {database} aside and {new_device}",
            )
        return (
            "warn",
            "the keys are not uploaded yet",
            "start the Matrix frontend: it uploads them",
        )
    if (published.ed25519, published.curve25519) != (keys.ed25519, keys.curve25519):
        return (
            "fail",
            f"the homeserver has other keys for device {device} than the store"
            f" (ed25519 {_fingerprint(published.ed25519)} there): messages to the bot are"
            " encrypted for keys it does not have",
            f"delete the store ({database}) and {new_device}",
        )
    left = f"{published.one_time_keys} signed_curve25519 one-time keys on the homeserver"
    if published.one_time_keys == 0:
        return (
            "warn",
            f"the homeserver publishes the same keys; {left}: nobody can start a new Olm"
            " session with the bot",
            "start the Matrix frontend: it uploads new ones",
        )
    return "ok", f"the homeserver publishes the same keys; {left}", ""
