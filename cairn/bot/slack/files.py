"""Files shared in Slack (uploads and snippets), fetched for the pipeline to read.

A ``file_share`` message lists its files; each is downloaded from its ``url_private`` with the
bot token in the ``Authorization`` header, as Slack requires (scope ``files:read``). When the
event leaves a file out (``file_access: check_file_info``), ``files.info`` tells where it is.
The token is sent only to the host of SLACK_API_URL or to Slack's own hosts, never to a URL
elsewhere; a file larger than CAIRN_ATTACHMENT_MAX_BYTES is not downloaded at all.
"""

from __future__ import annotations

import logging
import urllib.request
from typing import Any
from urllib.error import URLError
from urllib.parse import urlsplit

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError

from cairn.sessions.events import Attachment

__all__ = ["shared_files"]

log = logging.getLogger(__name__)

_TIMEOUT = 30.0
# Files a message can carry (Slack allows ten per message).
_MAX_FILES = 10


def shared_files(
    client: WebClient, files: Any, *, max_bytes: int, api_url: str
) -> tuple[Attachment, ...]:
    """The files of a message (its event's ``files``), each fetched or refused with a reason."""
    if not isinstance(files, list):
        return ()
    return tuple(
        _fetched(client, f, max_bytes, api_url) for f in files[:_MAX_FILES] if isinstance(f, dict)
    )


def _fetched(client: WebClient, file: dict[str, Any], max_bytes: int, api_url: str) -> Attachment:
    if file.get("file_access") == "check_file_info" or not _url(file):
        try:
            file = dict(client.files_info(file=str(file.get("id") or "")).get("file") or file)
        except (SlackApiError, SlackClientError, OSError) as exc:
            log.warning("files.info failed for %s: %s", file.get("id"), exc)
    name = str(file.get("name") or file.get("title") or file.get("id") or "file")
    size = _size(file.get("size"))
    media = str(file.get("mimetype") or "")
    if file.get("mode") == "tombstone" or file.get("file_access") == "access_denied":
        return Attachment(
            name, media, size, refused="the file was deleted or is not shared with me"
        )
    if size > max_bytes:
        return Attachment(name, media, size)  # refused without its bytes
    url = _url(file)
    if not url or not _trusted(url, api_url):
        return Attachment(name, media, size, refused="Slack gave no address I may fetch it from")
    # The scheme is http(s), checked by _trusted.
    headers = {"Authorization": f"Bearer {client.token}"}
    request = urllib.request.Request(url, headers=headers)  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=_TIMEOUT) as response:  # noqa: S310
            data = response.read(max_bytes + 1)
    except (URLError, OSError) as exc:
        log.warning("could not download Slack file %s: %s", file.get("id"), exc)
        return Attachment(name, media, size, refused="the download failed")
    return Attachment(name, media, max(size, len(data)), data=data)


def _url(file: dict[str, Any]) -> str:
    return str(file.get("url_private_download") or file.get("url_private") or "")


def _size(value: Any) -> int:
    try:
        return max(0, int(value))
    except (TypeError, ValueError):
        return 0


def _trusted(url: str, api_url: str) -> bool:
    """Whether the bot token may go to ``url``: Slack's hosts, or SLACK_API_URL's own."""
    host = urlsplit(url).hostname or ""
    return urlsplit(url).scheme in {"https", "http"} and (
        host == "slack.com" or host.endswith(".slack.com") or host == urlsplit(api_url).hostname
    )
