"""What ``cairn doctor`` found out about whether a model calls tools, kept for the runtime.

One small JSON file, ``CAIRN_HOME/model_tools.json``, holds a finding per endpoint and model (the
base URL, credentials masked, and the model or Azure deployment). ``cairn doctor`` writes it
atomically each time it probes; the OpenAI-compatible adapter reads it when
``CAIRN_MODEL_TOOLS`` is not set (an explicit setting always wins). A finding is trusted for
:data:`TRUSTED_FOR` after it was made: a model behind a URL changes (a new tag pulled, vLLM
restarted with a tool parser), and a stale "no tools" would silently keep a model that learnt
to call tools from its memory tools (docs/adr/0036).
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Literal

from cairn.core.atomic import write_atomically
from cairn.core.errors import StorageError
from cairn.core.redact import mask_url

__all__ = ["FINDINGS_FILE", "TRUSTED_FOR", "ToolFinding", "ToolFindings", "finding_key"]

log = logging.getLogger(__name__)

FINDINGS_FILE = "model_tools.json"
"""The file's name under CAIRN_HOME."""

TRUSTED_FOR = timedelta(days=30)
"""How long after it was made a finding decides; older, the runtime tries tools again."""

How = Literal["called", "malformed", "refused", "text"]


@dataclass(frozen=True, slots=True)
class ToolFinding:
    """One probe's outcome: whether the model calls tools, how that showed, and when."""

    tools: bool
    how: How  # the server refused tools, it answered in text, called with bad or good arguments
    found_at: datetime

    def age(self, now: datetime | None = None) -> timedelta:
        """How long ago the finding was made."""
        return (now or datetime.now(UTC)) - self.found_at

    def stale(self, now: datetime | None = None) -> bool:
        """True once the finding is older than :data:`TRUSTED_FOR`."""
        return self.age(now) > TRUSTED_FOR


def finding_key(base_url: str, model: str) -> str:
    """The key of an endpoint's model: its base URL (credentials masked, no trailing slash) and
    the model, so that another server or another model is never decided by this finding."""
    return f"{mask_url(base_url).rstrip('/')} {model}"


class ToolFindings:
    """The findings file of one CAIRN_HOME."""

    def __init__(self, home: Path) -> None:
        self.path = home / FINDINGS_FILE

    def get(self, key: str) -> ToolFinding | None:
        """The finding recorded for ``key``, or None (none, or the file unreadable: logged)."""
        entry = self._read().get(key)
        if not isinstance(entry, dict):
            return None
        try:
            found_at = datetime.fromisoformat(entry["found_at"])
            if found_at.tzinfo is None:
                raise ValueError("found_at has no time zone")
            return ToolFinding(bool(entry["tools"]), entry["how"], found_at)
        except (KeyError, TypeError, ValueError) as exc:
            log.warning("ignoring the finding for %s in %s: %s", key, self.path, exc)
            return None

    def record(self, key: str, finding: ToolFinding) -> None:
        """Write ``finding`` for ``key``, keeping the others; atomic (a crash leaves the old
        file or the new one). Raises StorageError when the file cannot be written."""
        entries = self._read()
        entries[key] = {**asdict(finding), "found_at": finding.found_at.isoformat()}
        try:
            write_atomically(self.path, json.dumps(entries, indent=1, sort_keys=True))
        except OSError as exc:
            raise StorageError(f"cannot write {self.path}: {exc}") from exc

    def _read(self) -> dict[str, object]:
        try:
            raw = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            log.warning("ignoring %s, which cannot be read: %s", self.path, exc)
            return {}
        if not isinstance(raw, dict):
            log.warning("ignoring %s: not a JSON object", self.path)
            return {}
        return raw
