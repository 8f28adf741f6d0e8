"""What Matrix clients such as Element put into the rooms and events tests create: room
presets, the encryption state, thread and reaction relations. Shared by the tests' plain HTTP
person and the encrypting one (:mod:`tests.support.matrix_e2e`)."""

from __future__ import annotations

from typing import Any

__all__ = ["MEGOLM", "encryption_state", "reaction", "room_preset", "thread_relation"]

MEGOLM = "m.megolm.v1.aes-sha2"


def room_preset(*, public: bool, direct: bool) -> str:
    """Anyone may join (``public_chat``), a direct chat (``trusted_private_chat``, as clients
    make DMs), or else invite-only (``private_chat``)."""
    return "public_chat" if public else "trusted_private_chat" if direct else "private_chat"


def encryption_state() -> dict[str, Any]:
    """The ``m.room.encryption`` state event that makes a new room Megolm-encrypted."""
    return {"type": "m.room.encryption", "state_key": "", "content": {"algorithm": MEGOLM}}


def thread_relation(root: str, reply_to: str | None = None) -> dict[str, Any]:
    """``m.relates_to`` of a message in the thread on ``root``: with the reply fallback to the
    root (``is_falling_back``), or a real reply to ``reply_to``."""
    return {
        "rel_type": "m.thread",
        "event_id": root,
        "is_falling_back": reply_to is None,
        "m.in_reply_to": {"event_id": reply_to or root},
    }


def reaction(event_id: str, key: str) -> dict[str, Any]:
    """The content of an ``m.reaction`` annotating ``event_id`` with ``key``."""
    return {"m.relates_to": {"rel_type": "m.annotation", "event_id": event_id, "key": key}}
