"""The parts of a running Cairn, wired from the settings: database, memory, LLM, locks, queue.

Frontends and workers build one :class:`Runtime` per process. Workers build theirs lazily, on
the first task, so that a forked worker never inherits its parent's connections.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import redis

from cairn.core.disk import check_start
from cairn.core.errors import ConfigError, StorageError
from cairn.core.redact import mask_url
from cairn.core.secrets import warm as warm_gate
from cairn.core.settings import Settings, get_settings
from cairn.db import Database
from cairn.mcp import ToolServers
from cairn.memory import MemoryStore
from cairn.memory.working import WorkingMemory, build_working_memory
from cairn.sessions.locks import LocalLocks, RedisLocks, SessionLocks
from cairn.sessions.stream import RedisStreams, ReplyStreams, local_streams

if TYPE_CHECKING:
    from cairn.llm.types import LLM

__all__ = ["Runtime", "build_runtime", "get_runtime", "reset_runtime"]

log = logging.getLogger(__name__)


@dataclass
class Runtime:
    """Everything a frontend or worker needs, built once per process."""

    settings: Settings
    db: Database
    memory: MemoryStore
    locks: SessionLocks
    redis: redis.Redis[bytes] | None = None
    _llm: LLM | None = field(default=None, repr=False)
    _working: WorkingMemory | None = field(default=None, repr=False)
    _streams: ReplyStreams | None = field(default=None, repr=False)
    _tool_servers: ToolServers | None = field(default=None, repr=False)
    _tool_servers_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def llm(self) -> LLM:
        """The configured language model (Anthropic with a key, else offline), built once."""
        if self._llm is None:
            self._llm = build_llm(self.settings)
        return self._llm

    @property
    def working(self) -> WorkingMemory:
        """The agents' scratchpads: in Redis when configured, else in this process; built once."""
        if self._working is None:
            self._working = build_working_memory(self.redis, self.settings.memory.working_ttl)
        return self._working

    @property
    def streams(self) -> ReplyStreams:
        """Where reply text travels as it is written: Redis pub/sub when Redis is configured
        (workers may be other processes), else this process."""
        if self._streams is None:
            # One per process: it keeps whether anyone listens (asked of Redis once a second).
            self._streams = RedisStreams(self.redis) if self.redis is not None else local_streams()
        return self._streams

    @property
    def tool_servers(self) -> ToolServers:
        """The declared MCP servers, each started on first use; built once per process."""
        with self._tool_servers_lock:
            if self._tool_servers is None:
                self._tool_servers = ToolServers(
                    self.settings.mcp, logs=self.settings.home_dir / "mcp"
                )
            return self._tool_servers

    def close(self) -> None:
        """Release connections (the database pool, Redis, a Qdrant server client, MCP servers)."""
        if self._tool_servers is not None:
            self._tool_servers.close()
        if self.memory.index is not None:
            self.memory.index.close()
        if self.redis is not None:
            self.redis.close()
        self.db.dispose()


def build_llm(settings: Settings) -> LLM:
    """The LLM adapter the settings ask for."""
    if settings.llm.provider == "anthropic":
        from cairn.llm.anthropic import AnthropicLLM

        return AnthropicLLM.from_settings(settings)
    if settings.llm.provider == "openai":
        from cairn.llm.openai import OpenAILLM

        return OpenAILLM.from_settings(settings)
    from cairn.llm.offline import OfflineLLM

    return OfflineLLM(delay=settings.llm.offline_delay)


def build_runtime(settings: Settings, *, migrate: bool = True, index: bool = True) -> Runtime:
    """Wire a runtime from ``settings``; migrates the database first unless told not to.

    ``index=False`` leaves the vector index out: a frontend that hands all work to Celery
    workers must not hold the local Qdrant folder, which only one process may open.

    Raises StorageError when the database is unreachable or behind, ConfigError for settings
    that only fail when used (an unreachable Redis), DiskFull when the filesystem under
    CAIRN_HOME is too small or too full (cairn.core.disk).
    """
    # Before anything maps or writes a file there: a full disk is a message, not a SIGBUS.
    check_start(
        settings.home_dir, settings.min_free_mb, embedded_index=index and not settings.qdrant_url
    )
    settings.home_dir.mkdir(parents=True, exist_ok=True)
    db = Database(settings.effective_database_url)
    if migrate:
        db.migrate()
    elif db.current_revision() != db.head_revision():
        raise StorageError(
            f"database {db.safe_url} is at revision {db.current_revision()}, "
            f"Cairn needs {db.head_revision()}: run `cairn migrate`"
        )
    client: redis.Redis[bytes] | None = None
    locks: SessionLocks = LocalLocks()
    url = settings.effective_redis_url
    if url:
        client = redis.Redis.from_url(url, socket_timeout=10, socket_connect_timeout=5)
        try:
            client.ping()
        except redis.RedisError as exc:
            var = "CAIRN_REDIS_URL" if settings.redis_url else "CAIRN_BROKER_URL"
            raise ConfigError(f"{var}: cannot reach Redis at {mask_url(url)}: {exc}") from exc
        locks = RedisLocks(client, ttl=settings.workers.lock_ttl)
    memory = MemoryStore.from_settings(db, settings, index=index)
    memory.reconcile()  # replay index work a crash left behind, refill a new collection
    return Runtime(settings=settings, db=db, memory=memory, locks=locks, redis=client)


_runtime: Runtime | None = None
_runtime_lock = threading.Lock()


def get_runtime() -> Runtime:
    """The process's runtime, built from the environment on first use (in workers)."""
    global _runtime
    with _runtime_lock:
        if _runtime is None:
            _runtime = build_runtime(get_settings(), migrate=False)
            warm_gate()  # a worker's first message does not load the detector
        return _runtime


def reset_runtime(runtime: Runtime | None = None) -> None:
    """Replace the process's runtime (the CLI sets the one it built; tests reset it)."""
    global _runtime
    with _runtime_lock:
        if _runtime is not None and _runtime is not runtime:
            _runtime.close()
        _runtime = runtime
