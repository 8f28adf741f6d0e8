"""The embedded index shared by the processes of one home: its owner serves it on a Unix socket.

Only one process may open an embedded shard (:mod:`.owner`). Every other process of the same
home (a second ``cairn worker``, ``cairn memory erase`` beside ``cairn run``) used to recall
lexically only, from the database: no dense search, and its writes waited in the outbox for the
owner. Now the owner serves its shard to them on a Unix socket beside the folder, and they
search and write through it (ADR 0047).

The wire format is a 4-byte big-endian length and a JSON object each way. Vectors travel as
base64 of their float32 bytes (a 384-d vector is 2 KB, not 8 KB of decimal text), times as ISO
strings, so that a naive time means the same to both sides. The socket file is the owner's
user's alone (0600), like the rest of ``CAIRN_HOME``.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import shutil
import socket
import socketserver
import struct
import tempfile
import threading
from array import array
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from cairn.memory.index.port import IndexedMemory, IndexUnavailable, VectorIndex
from cairn.memory.periods import Period
from cairn.memory.scope import WORKSPACE

__all__ = ["ShardClient", "ShardServer", "address_file"]

log = logging.getLogger(__name__)

_HEADER = struct.Struct(">I")
_MAX_MESSAGE = 256 * 1024 * 1024  # an upsert of 500 long memories is a few MB; this is a guard
_SUN_PATH_MAX = 100  # sockaddr_un holds 108 bytes on Linux, 104 on macOS, with its NUL

# How long a caller waits for the owner: searches are a millisecond, but wait behind the owner's
# own writes; a rewrite of the shard (compact, optimize) takes minutes at 100,000 points.
_TIMEOUTS = {"compact": 3600.0, "optimize": 3600.0, "upsert": 120.0, "delete": 120.0}
_DEFAULT_TIMEOUT = 15.0


def address_file(shard: Path) -> Path:
    """The file beside ``shard`` that names the socket its owner serves it on."""
    return shard.with_name(shard.name + ".serve")


def _vector(values: Sequence[float] | None) -> str | None:
    return None if values is None else base64.b64encode(array("f", values).tobytes()).decode()


def _floats(text: str | None) -> list[float] | None:
    if text is None:
        return None
    values = array("f")
    values.frombytes(base64.b64decode(text))
    return values.tolist()


def _time(when: datetime | None) -> str | None:
    return None if when is None else when.isoformat()


def _parse_time(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text)


def _memory(item: IndexedMemory) -> dict[str, Any]:
    return {
        "id": item.memory_id,
        "text": item.text,
        "tenant": item.tenant,
        "agent": item.agent,
        "visibility": item.visibility,
        "vector": _vector(item.vector),
        "created": _time(item.created_at),
        "room": item.private_to,
    }


def _parse_memory(data: dict[str, Any]) -> IndexedMemory:
    return IndexedMemory(
        int(data["id"]),
        str(data["text"]),
        str(data["tenant"]),
        data["agent"],
        str(data["visibility"]),
        vector=_floats(data["vector"]),
        created_at=_parse_time(data["created"]),
        private_to=data["room"],
    )


def _query(
    tenant: str, agent: str, k: int, rooms: Sequence[str] | None, periods: Sequence[Period]
) -> dict[str, Any]:
    return {
        "tenant": tenant,
        "agent": agent,
        "k": k,
        "rooms": None if rooms is None else list(rooms),
        "periods": [[p.start.isoformat(), p.end.isoformat()] for p in periods],
    }


def _parse_query(data: dict[str, Any]) -> tuple[tuple[str, str, int], dict[str, Any]]:
    periods = [
        Period(datetime.fromisoformat(start), datetime.fromisoformat(end))
        for start, end in data["periods"]
    ]
    rooms = data["rooms"]
    return (str(data["tenant"]), str(data["agent"]), int(data["k"])), {
        "rooms": None if rooms is None else [str(r) for r in rooms],
        "periods": periods,
    }


def _pairs(found: list[tuple[int, float]]) -> list[list[float]]:
    return [[memory_id, score] for memory_id, score in found]


def _found(pairs: list[list[float]]) -> list[tuple[int, float]]:
    return [(int(memory_id), float(score)) for memory_id, score in pairs]


def _answer(index: VectorIndex, request: dict[str, Any]) -> Any:
    """What the owner's ``index`` says to one request; raises KeyError for an unknown one."""
    op = request["op"]
    if op == "search":
        args, options = _parse_query(request)
        return _pairs(index.search(str(request["query"]), *args, **options))
    if op == "search_dense":
        args, options = _parse_query(request)
        vector = _floats(request["vector"]) or []
        return _pairs(index.search_dense(vector, *args, **options))
    if op == "candidates":
        args, options = _parse_query(request)
        lexical, dense = index.candidates(
            str(request["query"]), _floats(request["vector"]), *args, **options
        )
        return [_pairs(lexical), _pairs(dense)]
    if op == "upsert":
        index.upsert([_parse_memory(m) for m in request["items"]])
        return None
    if op == "delete":
        index.delete([int(i) for i in request["ids"]])
        return None
    if op == "count":
        return index.count()
    if op == "optimize":
        index.optimize()
        return None
    if op == "compact":
        index.compact()
        return None
    raise KeyError(f"unknown request {op!r}")


def _send(sock: socket.socket, message: Any) -> None:
    body = json.dumps(message, separators=(",", ":")).encode()
    sock.sendall(_HEADER.pack(len(body)) + body)


def _receive(sock: socket.socket) -> bytes | None:
    """The body of the next message on ``sock``; None when the peer closed it between
    messages. Raises ConnectionError when it closed mid-message, ValueError for a length over
    the limit (the stream can't be read further), OSError for the socket's own failures."""
    header = _exactly(sock, _HEADER.size, at_start=True)
    if header is None:
        return None
    (size,) = _HEADER.unpack(header)
    if size > _MAX_MESSAGE:
        raise ValueError(f"a message of {size} bytes is over the {_MAX_MESSAGE}-byte limit")
    body = _exactly(sock, size, at_start=False)
    assert body is not None
    return body


def _exactly(sock: socket.socket, size: int, *, at_start: bool) -> bytes | None:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            if at_start and not chunks:
                return None
            raise ConnectionError("the other side closed the connection mid-message")
        chunks += chunk
    return bytes(chunks)


class _Handler(socketserver.BaseRequestHandler):
    server: _Server

    def handle(self) -> None:
        sock: socket.socket = self.request
        while True:
            try:
                body = _receive(sock)
            except (OSError, ValueError) as exc:
                log.warning("index server: dropped a connection: %s", exc)
                return
            if body is None:
                return
            try:
                reply = {"ok": _answer(self.server.index, json.loads(body))}
            except IndexUnavailable as exc:
                reply = {"error": str(exc)}
            except Exception as exc:  # a bad request must not take the owner's server down
                reply = {"error": f"{type(exc).__name__}: {exc}"}
            try:
                _send(sock, reply)
            except OSError:
                return


class _Server(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True
    index: VectorIndex


class ShardServer:
    """Serves the shard of ``index`` (which this process owns) to the home's other processes,
    on a socket named in :func:`address_file` of ``shard``, until :meth:`stop`."""

    def __init__(self, index: VectorIndex, shard: Path) -> None:
        self._index = index
        self._address_file = address_file(shard)
        beside = shard.with_name(shard.name + ".sock")
        self._folder: Path | None = None
        if len(os.fsencode(beside)) <= _SUN_PATH_MAX:
            self._socket = beside
        else:  # a deep CAIRN_HOME: a private folder of its own under the temporary directory
            self._folder = Path(tempfile.mkdtemp(prefix="cairn-index-"))
            self._socket = self._folder / "shard.sock"
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> ShardServer:
        """Bind and serve on a thread of its own. Raises OSError when the socket can't be made."""
        with contextlib.suppress(FileNotFoundError):
            self._socket.unlink()  # left by an owner that was killed: we hold the lock now
        umask = os.umask(0o177)
        try:
            server = _Server(str(self._socket), _Handler)
        finally:
            os.umask(umask)
        server.index = self._index
        self._server = server
        partial = self._address_file.with_name(self._address_file.name + ".new")
        partial.write_text(str(self._socket), encoding="utf-8")
        partial.replace(self._address_file)
        self._thread = threading.Thread(
            target=server.serve_forever, name="cairn-index-server", daemon=True
        )
        self._thread.start()
        log.info("serving the embedded index to this home's other processes at %s", self._socket)
        return self

    def stop(self) -> None:
        """Stop serving and remove the socket and its address file."""
        server, self._server = self._server, None
        if server is not None:
            # The loop notices a shutdown between two waits for a connection, which last half
            # a second: that was added to the exit of every command that opened the index. A
            # connection of our own ends the wait at once.
            stopper = threading.Thread(target=server.shutdown, daemon=True)
            stopper.start()
            while stopper.is_alive():
                with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX) as poke:
                    poke.connect(str(self._socket))
                stopper.join(0.005)
            server.server_close()
        with contextlib.suppress(OSError):
            if self._address_file.read_text(encoding="utf-8") == str(self._socket):
                self._address_file.unlink()
        with contextlib.suppress(FileNotFoundError):
            self._socket.unlink()
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)


class ShardClient:
    """The index of another process of this home, reached through the socket it serves on.

    Each thread keeps its own connection. Any failure (no owner, a dead one, a timeout, an
    error of the owner's engine) is raised as IndexUnavailable, as the engine's own would be.
    """

    def __init__(self, shard: Path, *, on_gone: Callable[[], None] | None = None) -> None:
        """``on_gone`` is called when the owner is not there any more (nothing listens on its
        socket, or it closed the connection mid-request), so that the caller can take the
        shard over at once instead of after its retry pause."""
        self._address_file = address_file(shard)
        self._local = threading.local()
        self._on_gone = on_gone

    def serving(self) -> bool:
        """Whether an owner has said where it serves (it may have died since)."""
        return self._address_file.exists()

    def _call(self, op: str, **arguments: Any) -> Any:
        timeout = _TIMEOUTS.get(op, _DEFAULT_TIMEOUT)
        try:
            sock = self._connection()
            sock.settimeout(timeout)
            _send(sock, {"op": op, **arguments})
            body = _receive(sock)
            if body is None:
                raise ConnectionError("the owner closed the connection")
            reply = json.loads(body)
        except (OSError, ValueError) as exc:
            self._drop()
            if self._on_gone is not None and isinstance(exc, ConnectionError | FileNotFoundError):
                self._on_gone()
            raise IndexUnavailable(
                f"the process that owns the embedded index did not answer ({op}): {exc}"
            ) from exc
        if "error" in reply:
            raise IndexUnavailable(f"the process that owns the embedded index: {reply['error']}")
        return reply["ok"]

    def _connection(self) -> socket.socket:
        sock: socket.socket | None = getattr(self._local, "sock", None)
        if sock is None:
            where = self._address_file.read_text(encoding="utf-8").strip()
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.settimeout(_DEFAULT_TIMEOUT)
                sock.connect(where)
            except OSError:
                sock.close()
                raise
            self._local.sock = sock
        return sock

    def _drop(self) -> None:
        sock: socket.socket | None = getattr(self._local, "sock", None)
        self._local.sock = None
        if sock is not None:
            sock.close()

    def upsert(self, items: list[IndexedMemory]) -> None:
        """Add or replace ``items`` in the owner's shard."""
        if items:
            self._call("upsert", items=[_memory(item) for item in items])

    def delete(self, memory_ids: list[int]) -> None:
        """Remove ``memory_ids`` from the owner's shard."""
        if memory_ids:
            self._call("delete", ids=list(memory_ids))

    def search(
        self,
        query: str,
        tenant: str,
        agent: str,
        k: int,
        *,
        rooms: Sequence[str] | None = (WORKSPACE,),
        periods: Sequence[Period] = (),
    ) -> list[tuple[int, float]]:
        """The owner's lexical search (see :meth:`VectorIndex.search`)."""
        return _found(self._call("search", query=query, **_query(tenant, agent, k, rooms, periods)))

    def search_dense(
        self,
        vector: list[float],
        tenant: str,
        agent: str,
        k: int,
        *,
        rooms: Sequence[str] | None = (WORKSPACE,),
        periods: Sequence[Period] = (),
    ) -> list[tuple[int, float]]:
        """The owner's dense search (see :meth:`VectorIndex.search_dense`)."""
        return _found(
            self._call(
                "search_dense", vector=_vector(vector), **_query(tenant, agent, k, rooms, periods)
            )
        )

    def candidates(
        self,
        query: str,
        vector: list[float] | None,
        tenant: str,
        agent: str,
        k: int,
        *,
        rooms: Sequence[str] | None = (WORKSPACE,),
        periods: Sequence[Period] = (),
    ) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
        """Both of the owner's searches in one round trip (see
        :meth:`VectorIndex.candidates`)."""
        lexical, dense = self._call(
            "candidates",
            query=query,
            vector=_vector(vector),
            **_query(tenant, agent, k, rooms, periods),
        )
        return _found(lexical), _found(dense)

    def count(self) -> int:
        """Points in the owner's shard."""
        return int(self._call("count"))

    def optimize(self) -> None:
        """Have the owner build its shard's search structures."""
        self._call("optimize")

    def compact(self) -> None:
        """Have the owner rewrite its shard with its live points only (erasure)."""
        self._call("compact")
