"""Masking of credentials in URLs, so that no message or log line Cairn writes carries a password.

A URL keeps its scheme, user, host, port and path (so a person can still see which server is
meant); the password of its user info and the values of token-like query parameters
(``api_key=``, ``token=``, ``password=``...) become ``***``. This module imports nothing of
Cairn's: every layer may use it.
"""

from __future__ import annotations

import re

__all__ = ["MASK", "mask_url", "mask_urls", "url_secrets", "userinfo_end"]

MASK = "***"

# A URL inside free text: a scheme, "://", then anything up to white space or a quote, less
# the punctuation of the sentence around it.
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s'\"<>`]*[^\s'\"<>`.,;:)\]}]")
# Query parameter names whose values are credentials (matched anywhere in the name, any case).
_SECRET_PARAMETER = re.compile(
    r"pass|pwd|secret|token|key|auth|sig|credential|session|appid|app_id|access", re.IGNORECASE
)


def _split(url: str) -> tuple[str, str | None, str, str] | None:
    """``url`` as (scheme and "://", user info or None, the address and path, query and fragment).

    The user info runs to the last "@" before the query: a password with an unescaped "/" or
    "@" is still found whole (at worst a port or path is hidden with it, never a password shown).
    A URL whose scheme was left out (``user:password@host/db``) is read as one too.
    """
    scheme, sep, rest = url.partition("://")
    if not sep:
        if "@" not in url:
            return None
        scheme, rest = "", url
    end = userinfo_end(rest)
    if end >= 0:
        userinfo, rest = rest[:end], rest[end + 1 :]
    cut = min((i for i in (rest.find("?"), rest.find("#")) if i >= 0), default=len(rest))
    return scheme + sep, (userinfo if end >= 0 else None), rest[:cut], rest[cut:]


def userinfo_end(rest: str) -> int:
    """Where the user info of a URL ends (its "@"), in ``rest``, the URL after "://"; -1
    when it has none. It runs to the last "@" before the path: a password may hold "?", "#",
    "@" or "/" (written unescaped), and is then still found whole."""
    first = rest.find("@")
    if first < 0:
        return -1
    cut = min((i for i in (rest.find("?"), rest.find("#")) if i >= 0), default=len(rest))
    if first > cut and (":" not in rest[:first] or "/" in rest[:first]):
        return -1  # an "@" in the query or the fragment: ?email=a@b.c
    slash = rest.find("/", first)
    last = rest.rfind("@", 0, slash if slash >= 0 else len(rest))
    return last if last >= 0 else -1


def _masked_query(tail: str) -> str:
    query, hash_, fragment = tail.partition("#")
    parts = re.split(r"([&;?])", query)
    for i, part in enumerate(parts):
        name, eq, value = part.partition("=")
        if eq and value and _SECRET_PARAMETER.search(name):
            parts[i] = f"{name}={MASK}"
    return "".join(parts) + hash_ + fragment


def mask_url(url: str) -> str:
    """``url`` with its password and token-like query values replaced by ``***``.

    Text that is not a URL comes back unchanged. Never raises.
    """
    split = _split(url)
    if split is None:
        return url
    scheme, userinfo, address, tail = split
    if userinfo is None:
        return scheme + address + _masked_query(tail)
    user, colon, password = userinfo.partition(":")
    if colon and password:
        userinfo = f"{user}:{MASK}"
    return f"{scheme}{userinfo}@{address}{_masked_query(tail)}"


def mask_urls(text: str) -> str:
    """``text`` with every URL in it masked as :func:`mask_url` does. Never raises."""
    return _URL.sub(lambda m: mask_url(m.group(0)), text)


def url_secrets(url: str | None) -> list[str]:
    """The credentials written in ``url``: its password and token-like query values."""
    split = _split(url or "")
    if split is None:
        return []
    _, userinfo, _, tail = split
    found = [(userinfo or "").partition(":")[2]]
    for part in re.split(r"[&;?]", tail.partition("#")[0]):
        name, _, value = part.partition("=")
        if _SECRET_PARAMETER.search(name):
            found.append(value)
    return [value for value in found if value]
