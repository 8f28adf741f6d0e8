"""The content-addressed artifact store: full texts behind the cards the prompt shows.

Content is stored once per SHA-256 (``artifact``); a ``context_artifact`` row links it to each
session that produced it, and retrieval goes through that link and the tenant, so a session can
only read what its own tenant stored. The bytes of an image a model is shown
(``artifact_image``) hang off its card's artifact, and are read through the same link.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from cairn.core.errors import NotFound
from cairn.core.tokens import count_tokens
from cairn.db import Database
from cairn.db.models import Artifact, ArtifactImage, ContextArtifact
from cairn.llm.types import ImageBlock

__all__ = ["ArtifactStore", "StoredArtifact", "address", "matching_lines"]

# Short ids shown on cards: long enough to be unique in any one tenant in practice.
SHORT = 12


def address(content: str) -> str:
    """The content address (hex SHA-256 of the UTF-8 text)."""
    return hashlib.sha256(content.encode()).hexdigest()


# Words of a query: ids, numbers, names (a dash, dot, slash or colon inside one keeps it whole).
_QUERY_WORD = re.compile(r"[\w][\w.:/-]*[\w]|[\w]")
# The longest line a search returns (a minified file is one line).
_LINE_CHARS = 500


def matching_lines(content: str, query: str, *, limit: int = 10) -> list[tuple[int, str]]:
    """The lines of ``content`` that hold words of ``query`` (case-insensitive), as (number
    from 1, line): those with the most distinct words first, then in order; at most ``limit``.
    A line that holds the whole query as written comes before all others."""
    words = list(dict.fromkeys(w.casefold() for w in _QUERY_WORD.findall(query)))
    if not words:
        return []
    phrase = query.strip().casefold()
    scored: list[tuple[int, int, str]] = []
    for number, line in enumerate(content.splitlines(), start=1):
        folded = line.casefold()
        hits = sum(1 for w in words if w in folded)
        if hits:
            whole = len(words) + 1 if len(words) > 1 and phrase in folded else 0
            scored.append((-(hits + whole), number, line[:_LINE_CHARS]))
    scored.sort()
    return [(number, line) for _, number, line in scored[:limit]]


@dataclass(frozen=True, slots=True)
class StoredArtifact:
    """An artifact as its session knows it."""

    sha256: str
    kind: str
    title: str
    chars: int
    tokens: int

    @property
    def short(self) -> str:
        """The id shown on cards and accepted by ``retrieve_artifact``."""
        return self.sha256[:SHORT]


class ArtifactStore:
    """Stores and retrieves artifacts for sessions of one database."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def put(
        self,
        session_id: int,
        tenant: str,
        content: str,
        *,
        kind: str,
        title: str,
        tokens: int | None = None,
    ) -> str:
        """Store ``content`` (once per hash) and link it to the session; returns its sha256.

        Idempotent: storing the same content again for the session changes nothing.
        """
        sha = address(content)
        with self.db.session() as s:
            self._ensure_content(s, sha, tenant, kind, content)
            linked = s.exec(
                select(ContextArtifact.id).where(
                    ContextArtifact.session_id == session_id, ContextArtifact.sha256 == sha
                )
            ).first()
            if linked is None:
                s.add(
                    ContextArtifact(
                        session_id=session_id,
                        tenant_id=tenant,
                        sha256=sha,
                        kind=kind,
                        title=title[:500],
                        chars=len(content),
                        tokens=count_tokens(content) if tokens is None else tokens,
                    )
                )
        return sha

    @staticmethod
    def _ensure_content(s: Session, sha: str, tenant: str, kind: str, content: str) -> None:
        if s.get(Artifact, sha) is not None:
            return
        try:
            with s.begin_nested():
                s.add(Artifact(sha256=sha, tenant_id=tenant, kind=kind, content=content))
        except IntegrityError:
            pass  # stored concurrently by another session: same content, same address

    def put_image(self, sha256: str, image: ImageBlock) -> None:
        """Keep ``image``'s bytes beside the artifact ``sha256`` (its card, stored first).

        Idempotent: an image kept already is left as it is.
        """
        with self.db.session() as s:
            if s.get(ArtifactImage, sha256) is not None:
                return
            try:
                with s.begin_nested():
                    s.add(
                        ArtifactImage(
                            sha256=sha256,
                            media_type=image.media_type,
                            width=image.width,
                            height=image.height,
                            data=image.data,
                        )
                    )
            except IntegrityError:
                pass  # kept concurrently: same card, same bytes

    def images(self, session_id: int, refs: Sequence[str]) -> list[ImageBlock]:
        """The kept images of the artifacts ``refs`` (full sha256s) that ``session_id`` holds,
        in the order of ``refs``; those not kept (or not its own) are left out."""
        if not refs:
            return []
        with self.db.session() as s:
            rows = s.exec(
                select(ArtifactImage)
                .join(ContextArtifact, col(ContextArtifact.sha256) == col(ArtifactImage.sha256))
                .where(
                    ContextArtifact.session_id == session_id,
                    col(ArtifactImage.sha256).in_(list(refs)),
                )
            ).all()
            found = {r.sha256: ImageBlock(r.media_type, r.data, r.width, r.height) for r in rows}
        return [found[ref] for ref in refs if ref in found]

    def get(self, tenant: str, ref: str, *, session_id: int | None = None) -> tuple[str, str]:
        """The full text and kind of the artifact ``ref`` (a full or short sha256).

        Only artifacts linked to a session of ``tenant`` (and to ``session_id`` when given)
        are found. Raises NotFound otherwise, or when a short id is ambiguous.
        """
        ref = ref.strip().lower()
        if len(ref) < 8 or any(c not in "0123456789abcdef" for c in ref):
            raise NotFound(f"{ref!r} is not an artifact id (8 to 64 hex digits)")
        with self.db.session() as s:
            query = select(ContextArtifact.sha256, ContextArtifact.kind).where(
                ContextArtifact.tenant_id == tenant,
                col(ContextArtifact.sha256).startswith(ref),
            )
            if session_id is not None:
                query = query.where(ContextArtifact.session_id == session_id)
            found: dict[str, str] = dict(s.exec(query).all())
            if not found:
                raise NotFound(f"no artifact {ref} in this thread")
            if len(found) > 1:
                raise NotFound(f"artifact id {ref} is ambiguous; give more of its digits")
            [(sha, kind)] = found.items()
            row = s.get(Artifact, sha)
            if row is None:  # pragma: no cover - the foreign key forbids it
                raise NotFound(f"no artifact {ref}")
            return row.content, kind

    def of_session(self, session_id: int) -> list[StoredArtifact]:
        """The artifacts a session produced, oldest first."""
        with self.db.session() as s:
            rows = s.exec(
                select(ContextArtifact)
                .where(ContextArtifact.session_id == session_id)
                .order_by(col(ContextArtifact.id))
            ).all()
            return [StoredArtifact(r.sha256, r.kind, r.title, r.chars, r.tokens) for r in rows]
