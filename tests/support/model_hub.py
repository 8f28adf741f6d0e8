"""A stand-in for the model hub's file endpoint, serving a checkpoint folder on loopback.

huggingface_hub resolves ``{endpoint}/{repo}/resolve/{revision}/{file}``: a HEAD for the commit
and ETag headers, then a GET for the bytes. This serves one repository from a local folder in
that wire format, so the real client downloads real weights without a hub.
"""

from __future__ import annotations

import hashlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Self

from tests.support.loopback import BackgroundServer

__all__ = ["ModelHub"]

_COMMIT = "0" * 39 + "1"


class ModelHub(BackgroundServer):
    """Serves the files of ``folder`` as revision ``main`` of ``repo``."""

    def __init__(self, repo: str, folder: Path) -> None:
        self.repo = repo
        self.folder = folder
        self.requests: list[tuple[str, str]] = []
        self.url = ""

    def start(self) -> Self:
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _file(self) -> Path | None:
                prefix = f"/{hub.repo}/resolve/"
                if not self.path.startswith(prefix):
                    return None
                _revision, _, name = self.path[len(prefix) :].partition("/")
                path = hub.folder / name
                return path if name and "/" not in name and path.is_file() else None

            def _headers(self, path: Path | None) -> None:
                hub.requests.append((self.command, self.path))
                if path is None:
                    self.send_response(404)
                    self.send_header("X-Error-Code", "EntryNotFound")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                size = path.stat().st_size
                etag = hashlib.sha256(path.read_bytes()).hexdigest()
                self.send_response(200)
                self.send_header("X-Repo-Commit", _COMMIT)
                self.send_header("ETag", f'"{etag}"')
                self.send_header("Content-Length", str(size))
                self.send_header("Content-Type", "application/octet-stream")
                self.end_headers()

            def do_HEAD(self) -> None:
                self._headers(self._file())

            def do_GET(self) -> None:
                path = self._file()
                self._headers(path)
                if path is not None:
                    self.wfile.write(path.read_bytes())

        httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{httpd.server_address[1]}"
        self._serve(httpd, "model-hub")
        return self
