"""Files sent in Matrix rooms (``m.file``, ``m.image``), fetched for the pipeline to read.

The bytes come from the homeserver's media repository through matrix-nio (authenticated
download). In an encrypted room the file is encrypted with its own key, which the (decrypted)
event carries: it is decrypted here, and its SHA-256 checked, before anything reads it. A file
larger than CAIRN_ATTACHMENT_MAX_BYTES, by the size the event announces, is not downloaded at
all; an image is (its header gives its size in pixels: it is recorded, not read).
"""

from __future__ import annotations

import logging
from typing import Any

from nio import (
    AsyncClient,
    MemoryDownloadResponse,
    RoomEncryptedMedia,
    RoomMessageMedia,
)
from nio.crypto.attachments import decrypt_attachment

from cairn.sessions.events import Attachment

__all__ = ["MEDIA_EVENTS", "caption", "fetched"]

log = logging.getLogger(__name__)

# The timeline events that carry a file: plain, and encrypted with the file's own key.
MEDIA_EVENTS = (RoomMessageMedia, RoomEncryptedMedia)


def caption(content: dict[str, Any]) -> str:
    """What the sender wrote with the file: the body when a ``filename`` is given apart from
    it (a caption, as Matrix 1.10 allows), else nothing (the body is the file's name)."""
    body, name = str(content.get("body") or ""), content.get("filename")
    return body if isinstance(name, str) and name and body != name else ""


async def fetched(client: AsyncClient, event: Any, max_bytes: int) -> Attachment:
    """The file of a media event, fetched (and decrypted), or refused with the reason."""
    content: dict[str, Any] = event.source.get("content") or {}
    found = content.get("info")
    info: dict[str, Any] = found if isinstance(found, dict) else {}
    name = str(content.get("filename") or content.get("body") or "file")
    media = str(info.get("mimetype") or getattr(event, "mimetype", "") or "")
    if content.get("msgtype") == "m.image" and not media:
        media = "image/*"
    size = _size(info.get("size"))
    if size > max_bytes:
        return Attachment(name, media, size)  # refused without its bytes
    url = str(getattr(event, "url", "") or "")
    if not url.startswith("mxc://"):
        return Attachment(name, media, size, refused="the event names no file to fetch")
    response = await client.download(mxc=url)
    if not isinstance(response, MemoryDownloadResponse):
        log.warning("could not download %s: %s", url, response)
        return Attachment(name, media, size, refused="the download failed")
    data = bytes(response.body)
    if isinstance(event, RoomEncryptedMedia):
        try:
            data = decrypt_attachment(data, event.key["k"], event.hashes["sha256"], event.iv)
        except Exception as exc:  # nio raises EncryptionError, or KeyError on a bad key
            log.warning("could not decrypt %s: %s", url, exc)
            return Attachment(name, media, size, refused="it could not be decrypted")
    return Attachment(name, media, max(size, len(data)), data=data[: max_bytes + 1])


def _size(value: Any) -> int:
    try:
        return max(0, int(value))
    except (TypeError, ValueError):
        return 0
