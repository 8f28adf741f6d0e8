"""The few named errors Cairn raises, each with a message a person can act on."""

from __future__ import annotations


class CairnError(Exception):
    """Base class of every error Cairn raises on purpose."""


class ConfigError(CairnError):
    """A setting is missing, malformed or contradicts another; the message names the variable."""


class StorageError(CairnError):
    """The database could not be reached, migrated or written."""


class InvalidInput(CairnError):
    """A message, memory or command was rejected before anything was stored."""


class LLMError(CairnError):
    """The language model could not answer (after retries, where retrying makes sense)."""


class LLMAuthError(LLMError):
    """The language model rejected the credentials; retrying will not help."""


class QueueError(CairnError):
    """The task queue (broker) could not take or deliver work."""


class SessionBusy(QueueError):
    """Another worker holds the session's lock (and will handle what is pending)."""


class NotFound(CairnError):
    """The thing asked for does not exist, or is not visible in the caller's scope."""


def first_line(exc: BaseException) -> str:
    """The first line of ``exc``'s message (its type's name when it has none), for logs and
    notices of one line: database drivers put whole server reports in their messages."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class Forbidden(CairnError):
    """The person asking may not do this (restore another's retraction, widen another's
    memory, confirm their own flagged memory)."""
