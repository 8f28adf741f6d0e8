"""``cairn doctor``: check every configured part for real and say what to fix.

Each check talks to the real thing (database, Redis, Qdrant, the LLM API, Slack, Matrix) with a
short timeout and reports ok, warn or fail with an actionable hint. Nothing is changed. No
line of the report shows a password or token written in a URL.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal

from cairn.core.redact import mask_urls
from cairn.core.settings import Settings, config_file

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
        _database,
        _redis,
        _workers,
        _vectors,
        _llm,
        _slack,
        _matrix,
    ]
    results = []
    for check in checks:
        try:
            result = check(settings)
        except Exception as exc:  # a check must report, never crash the report
            result = Check(check.__name__.strip("_"), "fail", f"{type(exc).__name__}: {exc}")
        results.append(replace(result, detail=mask_urls(result.detail), fix=mask_urls(result.fix)))
    return results


def _config(settings: Settings) -> Check:
    source = config_file()
    where = f"environment + {source}" if source else "environment (no cairn.toml)"
    return Check("config", "ok", f"read from {where}; data in {settings.home_dir}")


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
    from cairn.core.errors import ConfigError
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
            "set ANTHROPIC_API_KEY for full answers",
        )
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
