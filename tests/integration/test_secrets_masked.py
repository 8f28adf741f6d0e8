"""No password or token written in a URL is ever printed or logged; the server it names still is.

The commands run as real processes on a fresh CAIRN_HOME, each with one URL that carries a
password, and nothing they print (settings, checks, errors) may show it.
"""

from __future__ import annotations

import io
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cairn.core.logs import configure_logging
from cairn.core.redact import mask_url

# Not "SECRET" alone: `cairn config` rightly prints SLACK_SIGNING_SECRET's name.
PASSWORD = "Pw-SECRET-4f2a"
HOST = "127.0.0.1:1"  # nothing listens on port 1: every check fails fast, naming the server

URLS = {
    "CAIRN_BROKER_URL": f"amqp://guest:{PASSWORD}@{HOST}/",
    "CAIRN_QDRANT_URL": f"http://u:{PASSWORD}@{HOST}",
    "CAIRN_DATABASE_URL": f"postgresql://u:{PASSWORD}@{HOST}/x",
    "CAIRN_REDIS_URL": f"redis://:{PASSWORD}@{HOST}/0",
}
COMMANDS = [("config",), ("config", "--json"), ("doctor",), ("doctor", "--json"), ("migrate",)]
# `cairn migrate` names only the database (and any settings error, as for an amqp:// broker).
NOT_NAMED_BY_MIGRATE = {"CAIRN_QDRANT_URL", "CAIRN_REDIS_URL"}


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
@pytest.mark.parametrize("variable", URLS)
def test_a_password_in_a_url_is_never_printed(
    clean_env: Path, variable: str, command: tuple[str, ...]
) -> None:
    env = {**os.environ, variable: URLS[variable]}
    done = subprocess.run(
        [sys.executable, "-m", "cairn", *command],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )
    printed = done.stdout + done.stderr
    assert PASSWORD not in printed
    if not (command[0] == "migrate" and variable in NOT_NAMED_BY_MIGRATE):
        assert HOST in printed, printed


@pytest.fixture
def log_stream() -> Iterator[io.StringIO]:
    """Cairn's logging, as every command configures it, written to a string."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    stream = io.StringIO()
    configure_logging("INFO", stream=stream, as_json=False)
    yield stream
    root.handlers[:] = handlers
    root.setLevel(level)


def test_every_log_record_has_the_credentials_of_its_urls_masked(
    log_stream: io.StringIO,
) -> None:
    log = logging.getLogger("cairn.test.secrets")
    log.warning("connecting to %s", f"redis://:{PASSWORD}/x@redis.internal:6379/0")
    log.warning("qdrant at http://qdrant.internal:6333/?api_key=%s&timeout=5", PASSWORD)
    try:
        raise ConnectionError(f"cannot reach amqp://guest:{PASSWORD}@rabbit.internal:5672/")
    except ConnectionError:
        log.exception("broker down")
    text = log_stream.getvalue()
    assert PASSWORD not in text
    for server in ("redis.internal:6379/0", "qdrant.internal:6333", "rabbit.internal:5672"):
        assert server in text
    assert "api_key=***&timeout=5" in text


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://u:pa/ss@word@db:5432/x", "postgresql://u:***@db:5432/x"),
        (
            "https://h/v1?token=abc&q=1;password=def#top",
            "https://h/v1?token=***&q=1;password=***#top",
        ),
        ("u:pw@db:5432/x", "u:***@db:5432/x"),
        ("sqlite:////home/me/.cairn/cairn.db", "sqlite:////home/me/.cairn/cairn.db"),
        ("https://bot@matrix.example.org", "https://bot@matrix.example.org"),
    ],
)
def test_a_url_keeps_everything_but_its_credentials(url: str, shown: str) -> None:
    assert mask_url(url) == shown
