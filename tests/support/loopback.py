"""A local HTTP server on a daemon thread, as the stand-ins for remote services need it."""

from __future__ import annotations

import threading
from http.server import ThreadingHTTPServer
from types import TracebackType
from typing import Self

__all__ = ["BackgroundServer"]


class BackgroundServer:
    """Serves an ``http.server`` on a daemon thread; subclasses provide ``start``/``stop``."""

    _httpd: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None

    def start(self) -> Self:
        """Bind and serve; returns self."""
        raise NotImplementedError

    def stop(self) -> None:
        """Stop serving and release the port."""
        self._shutdown()

    def _serve(self, httpd: ThreadingHTTPServer, name: str) -> None:
        self._httpd = httpd
        # A short poll keeps stop() quick; the default half second adds up over a test suite.
        self._thread = threading.Thread(
            target=httpd.serve_forever, args=(0.05,), name=name, daemon=True
        )
        self._thread.start()

    def _shutdown(self) -> bool:
        """Stop the server; False when it was not running."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return False
        httpd.shutdown()
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        return True

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
