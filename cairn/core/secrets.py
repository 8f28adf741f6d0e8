"""Credentials in free text: found, named and masked, so that none is stored, logged or echoed.

:func:`find_secrets` finds the credentials in a text: API keys and tokens in the shapes their
providers give them (Slack, Anthropic, OpenAI, AWS, GitHub, GitLab, Google, Stripe, npm, ...),
JSON Web Tokens, private key blocks, bearer tokens, passwords stated as such ("the admin
password is ...", "pwd=...", "mot de passe : ..."), passwords and tokens written in URLs, and
long random strings. :func:`mask_secrets` replaces each with a label that names its kind, so
the rest of the text can still be read, answered or logged.

What only talks about a secret is not one: "the password is in the team vault", "rotate the API
key every 90 days", and neither are identifiers that merely look random (git SHAs, UUIDs, hex
digests, versions, hostnames, paths). This module imports nothing of Cairn's above cairn.core.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from cairn.core.credentials import (
    bare_code,
    chat_secrets,
    code_sent_after,
    descriptive,
    literal_alternation,
    lowered,
    not_a_value,
    placeholder,
    public_spans,
    said_of_something_else,
    ui_string,
)
from cairn.core.redact import url_secrets, userinfo_end

__all__ = [
    "SECRET_MARK",
    "Secret",
    "find_answered",
    "find_secrets",
    "find_split",
    "has_secret",
    "mask_secrets",
    "mask_secrets_in",
    "removed",
]

# How every marker :func:`removed` writes begins, so a masked text is known as such.
SECRET_MARK = "[secret removed:"  # noqa: S105 (a marker, not a password)


@dataclass(frozen=True, slots=True)
class Secret:
    """One credential in a text: what it is (a label a person can read) and where it is."""

    kind: str
    start: int
    end: int


def removed(kind: str) -> str:
    """What :func:`mask_secrets` writes in place of a secret of ``kind``."""
    return f"{SECRET_MARK} {kind}]"


class _Shape:
    """A kind of credential: its pattern, the group that holds the credential itself ("value":
    the quoted or bare value of :data:`_VALUE`), and a check of that value (None: the pattern
    alone decides).

    The pattern is tried only where one of its ``anchors`` (lower case) occurs: at the anchor
    itself, or (``in_word``) anywhere in the white-space separated word that holds it. Most
    messages hold no secret, and a substring search costs far less than a pattern that has
    to be tried at every position.
    """

    __slots__ = ("anchors", "check", "group", "in_word", "kind", "pattern")

    def __init__(
        self,
        kind: str,
        anchors: tuple[str, ...],
        pattern: str,
        group: str | int = 0,
        check: Callable[[str], bool] | None = None,
        *,
        in_word: bool = False,
    ) -> None:
        self.kind, self.anchors, self.group, self.check = kind, anchors, group, check
        self.pattern = re.compile(pattern)
        self.in_word = in_word


# A token ends where a character that could continue it is absent: these helpers keep a shape
# from matching inside a longer word ("desk-ant-...", "xAKIA...").
_NOT_AFTER = r"(?<![A-Za-z0-9_\-])"
_NOT_BEFORE = r"(?![A-Za-z0-9_\-])"

# The words that, right after "the password is" and its like, say something about a secret
# instead of stating it (English first, then the other languages the keywords below cover).
_STOP_WORDS = frozenset(
    """
    a an the this that these those it its not no none nothing never now still also only just
    yes off true false in on at of by for from to with without within inside under into
    through per as like
    via behind across stored kept held saved managed rotated expired expiring reset changed
    required needed set same different shared handled generated provided given sent synced
    documented described listed written posted pinned mentioned known unknown available missing
    empty blank wrong incorrect invalid correct valid weak strong long short secure insecure
    random mandatory optional protected encrypted hashed salted updated removed revoked
    deleted disabled enabled locked unlocked compromised leaked exposed old new temporary
    default case sensitive too very quite being been be is are was were will should must can
    could may might here there where what which who whatever anything something someone
    your my our their his her vault 1password bitwarden lastpass keepass keychain manager
    policy rules standard same see check ask refer please tbd todo unchanged due ok fine good
    bad easy hard simple complex unique reused different yours mine ours theirs one two three
    dans sur chez avec sans pour par est sont le la les un une des du pas jamais toujours
    stocke stockee gere geree change changee expire expiree reinitialise obligatoire requis
    en esta la el los las una uno del al no nunca siempre guardada almacenada cambiada
    caducada obligatoria requerida para por con sin
    im ist wird der die das dem den des ein eine einem nicht kein keine nie immer gespeichert
    geandert abgelaufen zuruckgesetzt erforderlich bei auf unter fur mit ohne von
    na em esta uma nao guardada alterada expirada obrigatoria
    staat het een niet opgeslagen gewijzigd verlopen verplicht
    nel nella il una non salvata cambiata scaduta obbligatoria
    в на не был была хранится изменён изменен сброшен
    gereset teruggezet hersteld reinitialisee restablecida restablecido reseteada reseteado
    reiniciada reiniciado redefinida redefinido resetada resetado reimpostata reimpostato
    resettata resettato zresetowane zresetowany zresetowano nollattu aterstallt aterstallts
    nulstillet tilbakestilt сброшено скинуто
    """.split()  # noqa: SIM905 - a word list reads best as prose
)
# Placeholders and references to where a secret lives, not the secret itself.
_PLACEHOLDER = re.compile(
    r"^(?:[$%<\[({]|\{\{|os\.|env\.|process\.env|secrets?\.|vault:|op://|\*{3,}|x{3,}$|\.{3,}"
    r"|redacted|hidden|masked|censored|(?:secret|password|passwd|pass|pwd|pw|token|example"
    r"|placeholder|your[_-]?password|my[_-]?password)$|<)",
    re.IGNORECASE,
)
# Endings of English words that describe a password rather than being one ("is expiring").
_TRAILING = ".,;:)]}>\"'\u201d\u2019\u00bb"  # and typographic closing quotes


def _entropy(text: str) -> float:
    """Shannon entropy of ``text``, in bits per character."""
    counts = Counter(text).values()
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in counts)


def _classes(text: str) -> int:
    """How many of lower case, upper case and digits ``text`` mixes."""
    return sum(
        (
            any(c.islower() for c in text),
            any(c.isupper() for c in text),
            any(c.isdigit() for c in text),
        )
    )


def _folded(word: str) -> str:
    """``word`` case-folded and without accents, as :data:`_STOP_WORDS` holds words."""
    if word.isascii():
        return word.lower()
    decomposed = unicodedata.normalize("NFKD", word.casefold())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def _stated_password(value: str) -> bool:
    """Whether ``value``, written after "password is" or the like, is a password."""
    word = _folded(value)
    if len(value) < 3 or word in _STOP_WORDS or _PLACEHOLDER.match(value) or placeholder(value):
        return False
    if len(set(value)) == 1 or re.fullmatch(r"[^\W\d_]+['’][^\W\d_]*[?!.]?", value):
        return False  # one character over and over; a word with an apostrophe (you'll)
    if value.isalpha() and value.islower() and (descriptive(word) or len(value) < 4):
        return False
    return not (value.isalpha() and value.istitle() and len(value) < 4)


def _strict_password(value: str) -> bool:
    """For a value after a bare keyword ("passwd hunter2"): a password only if it is not a
    plain word."""
    return _stated_password(value) and not value.isalpha()


def _stated_key(value: str) -> bool:
    """Whether ``value``, written after "the API key is" or the like, is a key: long enough,
    letters and digits, not a placeholder."""
    if len(value) < 8 or _folded(value) in _STOP_WORDS or _PLACEHOLDER.match(value):
        return False
    letters = any(c.isalpha() for c in value)
    digits = any(c.isdigit() for c in value)
    return letters and digits and len(set(value)) >= 5


def _long_random(value: str) -> bool:
    """Whether ``value`` is a token-like string: mixed classes, not a plain word."""
    return len(value) >= 12 and _classes(value) >= 2 and any(c.isdigit() for c in value)


_HEX = re.compile(r"[0-9a-fA-F\-]+")
# Runs that make a string structured rather than random: words (lower, Capitalised or
# UPPER case) and numbers. A random base62 string of 24 characters or more has less than 45%
# of its length in such runs 19 times out of 20; names and identifiers have more.
_STRUCTURED = re.compile(r"[A-Z]?[a-z]{4,}|[A-Z]{4,}|[0-9]{3,}")
_SEPARATORS = re.compile(r"[_\-]")
# Base64 openings of SSH public keys (public, so not a secret): ssh-rsa, ssh-ed25519, ecdsa.
_SSH_PUBLIC = ("AAAAB3NzaC1yc2E", "AAAAC3NzaC1lZDI1NTE5", "AAAAE2VjZHNh")


def _encoded_text(body: str) -> bool:
    """Whether ``body`` is base64 of words (a config, a sentence, JSON, a certificate):
    data, not a key. Base64 of a private key is a key."""
    try:
        raw = base64.b64decode(body[: len(body) // 4 * 4], validate=True)
    except (binascii.Error, ValueError):
        try:
            raw = base64.urlsafe_b64decode(body[: len(body) // 4 * 4])
        except (binascii.Error, ValueError):
            return False
    decoded = raw.decode("utf-8", "replace")
    if "PRIVATE KEY" in decoded:
        return False
    if decoded.startswith("-----BEGIN ") or decoded.startswith("ssh-"):
        return True  # a certificate or a public key, encoded
    decoded = decoded.split("\ufffd", 1)[0]
    if len(decoded) < 12:
        return False
    flat = decoded.replace("\n", "")
    claims = set(re.findall(r'"(\w+)"\s*:', decoded))
    if claims and claims <= {"alg", "typ", "kid", "cty", "x5t", "jku", "enc", "zip", "crit"}:
        return True  # a JSON Web Token's header alone: it says how, and holds nothing
    if claims & {"alg", "typ", "sub", "iat", "exp", "iss", "aud", "jti", "kid"}:
        return False  # a part of a JSON Web Token
    if not flat.isprintable():
        return False
    if " " in decoded or "\n" in decoded or decoded.startswith(("{", "[")) or '":' in decoded:
        return True
    if re.fullmatch(r"[a-z]{2,}(?:[-_.][a-z]{2,}){1,2}", decoded):
        return True  # a name of two or three words (platform-oncall), as a label encodes one
    # A setting (environment=staging): words, and no credential in it (admin:hunter2 is one).
    letters = sum(c.isalpha() for c in flat)
    return (
        bool(re.fullmatch(r"[\w.\-]+[=:][\w.\-,]+", flat))
        and letters >= 0.7 * len(flat)
        and not chat_secrets(flat.replace(":", " = ", 1))
    )


# An id as many APIs print one: a short word for its type, a hyphen, 8 to 16 random letters
# and digits (Terraform's run-, ws-, org-): too short for a key, which a type word would name.
_TYPED_ID = re.compile(r"([a-z]{2,6})-[A-Za-z0-9]{8,16}")
_KEY_TYPES = frozenset(
    """
    sk pk key keys pat tok token pass pwd pw pin otp api psk auth secret cred sess sid
    """.split()  # noqa: SIM905 (a word list reads best as prose)
)
# Words or numbers joined by hyphens, then a hex digest of 32 characters or more: a digest
# is not secret alone (hex is not read as a key here), nor with a name before it.
_NAMED_DIGEST = re.compile(r"(?:[A-Za-z0-9][A-Za-z0-9.]*[-_:])+[0-9a-f]{32,}")
_UUID_IN = re.compile(r"[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}")


def _high_entropy(token: str) -> bool:
    """Whether ``token`` reads as a random credential: not hex (SHAs, UUIDs, digests), letters
    and digits mixed, little structure (words, numbers), high Shannon entropy, and not base64
    of plain text; a path is random only where one of its parts is."""
    body = token.rstrip("=")
    if re.match(r"[a-z]{2,6}_|(?:sha\d+|md5|blake2b?|h1)[-:]|bc1[02-9ac-hj-np-z]{20,}$", body):
        return False  # an object id with its type (cus_, pi_: keys come above), a hash
    if body.startswith("nonce-"):
        return False  # a CSP nonce: sent in every page's header and markup, public by design
    typed = _TYPED_ID.fullmatch(body)
    if typed is not None and typed.group(1) not in _KEY_TYPES:
        return False  # an object id with its type and a hyphen: run-tkAcFeOFwdEqGPk0, ws-...
    if _NAMED_DIGEST.fullmatch(body) and not _KEY_TYPES & set(re.split(r"[-_:.]", body.lower())):
        return False  # a name ending in a digest (a cache key: linux-node20-<sha256>)
    if "/" in body.strip("/") and not body.startswith(_SSH_PUBLIC):
        parts = [p for p in body.split("/") if p]
        if len(parts) > 1 and any(re.fullmatch(r"[a-z][a-z\-_]+", p) for p in parts):
            return any(_high_entropy(p) for p in parts)  # a path: key/<uuid>, role/x
    if len(body) < (20 if _classes(body) == 3 else 24) or _HEX.fullmatch(body):
        return False
    if _UUID_IN.search(body):
        return False  # a name with a UUID in it: eks-gpu-pool-d8fbd93d-fed2-...
    if body.startswith(_SSH_PUBLIC):
        return False
    if body[0] in "/~" or not any(c.isdigit() for c in body):
        return False
    segments = _SEPARATORS.split(body)
    if len(segments) >= 3 and all(len(s) <= 8 for s in segments):
        return False  # a name built of short parts: pod-7d9f8-x2k4q, GHSA-2x3c-4v5b-6n7m
    classes = _classes(body)
    if classes < 2 or (classes == 2 and len(body) < 32):
        return False
    structured = sum(len(m) for m in _STRUCTURED.findall(body))
    if structured > 0.45 * len(body):
        return False
    if _entropy(body) < min(4.0, 0.8 * math.log2(len(body))):
        return False
    return not _encoded_text(body)


def _word(*alternatives: str) -> str:
    return "(?:" + "|".join(alternatives) + ")"


# Paths of a link that signs someone in, resets a password or accepts an invitation: a
# random part or query value of such a link is the key to an account.
_SIGN_IN = (
    r"(?:reset|password|passwort|forgot|recover|recovery|magic|magic-link|magiclink|login"
    r"|log-in|signin|sign-in|sso|auth|verify|verification|confirm|activate|activation|invite"
    r"|invitation|onboard|join|accept|passwordless|otp|one-time|onetime|impersonate|unlock"
    r")(?:[-_](?:password|passwort|link|token|email|account|invite|login|code))*"
)
_SIGN_IN_PATH = re.compile(
    r"(?i)/(?:[\w-]*[_-])?" + _SIGN_IN + r"(?:/|\?|#|$)"
    r"|/[\w-]*(?:jelszo|passw|contras|senha|hasl|wachtw|parol|sifre|mot-de-passe|restablec"
    r"|redefin|zuruecksetz|recuper|wiederherst|visszaall)[\w-]*(?:/|\?|#|$)"
)


# What a password is called, in English and in the other languages people write in; the
# anchors are where such a word starts.
_PASSWORD_WORD = _word(
    r"(?<![A-Za-z])(?i:pass(?:word|phrase|code|wd|wort)|pwd|pw)(?![A-Za-z])",
    r"(?i:mot de passe|mdp|contrase[ñn]a|kennwort|wachtwoord|senha|пароль)",
    r"パスワード|密码|密碼|비밀번호",
)
_PASSWORD_ANCHORS = (
    "pass", "pw", "mot de passe", "mdp", "contrase", "kennwort", "wachtwoord", "senha",
    "пароль", "パスワード", "密码", "密碼", "비밀번호",
)  # fmt: skip
# "for the grafana admin account", "de la base", "für den Server": what the password is for.
_FOR_WHAT = (
    r"(?:\s+(?i:for|of|on|to|at|de|du|pour|del|para|für|fur|von|voor|van|di|per|da|do|dla|от|для))"
    r"(?:\s+(?i:the|our|my|le|la|l'|el|den|dem|der|die|das|de|het|il|lo|o|a))?"
    r"(?:\s+[\w.@:/\-]+){1,3}?"
)
# How a password is said to be what follows (longer phrasings first: "is now" before "is").
_IS = (
    r"(?:\s*(?::=|=>|->|\u2192|[:=\uff1a])\s*|\s*(?:は|是|为|為|это|\u2014|\u2013)\s*"
    r"|\s+(?i:is now|is still|is set to|is currently|has been set to|has been changed to|is"
    r"|was set to|was changed to|was|will be|equals|set to|changed to|est|es|ist|è ora|é|è"
    r"|är|er|is nu|wordt|ora è|sera|era|lautet|\u2014|-)\s+)"
)
# The value: quoted (and may then hold spaces), or up to white space or a separator.
_OPEN, _CLOSE = "\"'\u201c\u2018\u00ab", "\"'\u201d\u2019\u00bb"  # typographic quotes too
_VALUE = rf"(?:[{_OPEN}](?P<q>[^{_CLOSE}\n]{{3,80}})[{_CLOSE}]|(?P<v>[^\s{_OPEN};&,][^\s;,]*))"

# What a key or token is called: "token", "secret", or "key" after a word that makes it a
# credential ("api key", "bot_token", "client-secret"); a bare "key" is too common to count.
_KEY_QUALIFIERS = (
    "api", "access", "auth", "bot", "app", "client", "private", "secret", "session", "refresh",
    "signing", "webhook", "deploy", "service", "license", "integration", "encryption", "master",
)  # fmt: skip
_KEY_WORD = (
    r"(?<![A-Za-z])(?i:token|secret|"
    + "|".join(f"(?<={q}{sep})key" for q in _KEY_QUALIFIERS for sep in ("", "_", "-", " "))
    + r")(?![A-Za-z])"
)

_BASE64ISH = r"[A-Za-z0-9/+]"
# An image's tag before its digest: python:3.12-slim@sha256:... is not user:password@host.
_IMAGE_TAG = re.compile(r"^\d+(?:\.\d+)*(?:-[a-z0-9.]+)*$")

_SHAPES: tuple[_Shape, ...] = (
    _Shape(
        "private key",
        ("-----begin",),
        r"-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----"
        r"(?:[\s\S]*?-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----|[A-Za-z0-9+/=\s:,\-]*)",
    ),
    _Shape(
        "Slack webhook URL",
        ("hooks.slack.com/",),
        r"(?:https?://)?hooks\.slack\.com/[A-Za-z0-9_/\-]+",
        in_word=True,
    ),
    _Shape(
        "Slack token", ("xox", "xapp-"), _NOT_AFTER + r"(?:xox[abposre]|xapp)-[A-Za-z0-9\-]{4,}"
    ),
    _Shape("Anthropic API key", ("sk-ant-",), _NOT_AFTER + r"sk-ant-[A-Za-z0-9_\-]{8,}"),
    _Shape(
        "OpenAI API key",
        ("sk-",),
        _NOT_AFTER + r"sk-(?!ant-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}" + _NOT_BEFORE,
        check=lambda v: any(c.isdigit() for c in v),
    ),
    _Shape(
        "AWS access key",
        ("akia", "asia", "agpa", "aida", "aroa", "aipa", "anpa", "anva", "abia", "acca"),
        r"(?<![A-Z0-9])(?:AKIA|ASIA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|ABIA|ACCA)[A-Z0-9]{16}"
        r"(?![A-Z0-9])",
    ),
    _Shape(
        "AWS secret key",
        ("secret",),
        r"(?i:secret(?:[_\- ]?access)?[_\- ]?key|(?<=aws[_\- ])secret|(?<=aws)secret)[\"']?"
        r"(?:\s*[:=]\s*|\s+(?i:is|=|:|was|is now)\s+|\s+)[\"']?"
        rf"(?P<v>{_BASE64ISH}{{40}})(?![A-Za-z0-9/+=])",
        "v",
    ),
    _Shape(
        "GitHub token",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        _NOT_AFTER + r"(?:(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{22,})",
    ),
    _Shape(
        "GitLab token",
        ("glpat-", "gldt-", "glrt-", "glptt-"),
        _NOT_AFTER + r"(?:glpat|gldt|glrt|glptt)-[A-Za-z0-9_\-]{20,}",
    ),
    _Shape("Google API key", ("aiza",), _NOT_AFTER + r"AIza[0-9A-Za-z_\-]{35}"),
    _Shape("Google OAuth token", ("ya29.",), _NOT_AFTER + r"ya29\.[0-9A-Za-z_\-]{20,}"),
    _Shape(
        "Stripe key",
        ("sk_live_", "rk_live_", "sk_test_", "rk_test_", "whsec_"),
        _NOT_AFTER + r"(?:(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,}|whsec_[0-9A-Za-z]{24,})",
    ),
    _Shape("npm token", ("npm_",), _NOT_AFTER + r"npm_[A-Za-z0-9]{30,}"),
    _Shape("PyPI token", ("pypi-",), _NOT_AFTER + r"pypi-AgE[A-Za-z0-9_\-]{40,}"),
    _Shape("Hugging Face token", ("hf_",), _NOT_AFTER + r"hf_[A-Za-z0-9]{30,}"),
    _Shape("SendGrid key", ("sg.",), _NOT_AFTER + r"SG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{20,}"),
    _Shape("Matrix access token", ("syt_",), _NOT_AFTER + r"syt_[A-Za-z0-9_]{10,}"),
    _Shape(
        "JSON Web Token",
        ("eyj",),
        _NOT_AFTER + r"eyJ[A-Za-z0-9_\-]{5,}\.eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]*",
    ),
    _Shape(
        "bearer token",
        ("auth",),
        r"(?<![A-Za-z])(?i:authorization|auth)\s*[:=]\s*(?i:bearer|token)\s+(?P<v>[A-Za-z0-9._~+/\-]{8,}=*)",
        "v",
    ),
    _Shape(
        "basic auth credentials",
        ("authorization",),
        r"(?<![A-Za-z])(?i:authorization)\s*[:=]\s*(?i:basic)\s+(?P<v>[A-Za-z0-9+/]{8,}=*)",
        "v",
    ),
    _Shape(
        "bearer token",
        ("bearer",),
        r"(?<![A-Za-z])(?i:bearer)\s+(?P<v>[A-Za-z0-9._~+/\-]{16,}=*)",
        "v",
        _long_random,
    ),
    _Shape(
        # user:password@host/... written without a scheme (those with one are URLs, below).
        "connection string password",
        ("@",),
        r"(?<![\w/:.%\-])[\w.%\-]+:(?P<v>[^\s@/:'\"<>]{3,})@[\w.\-]+(?::\d{2,5}/?|/)",
        "v",
        lambda v: _stated_password(v) and not v.isdigit() and not _IMAGE_TAG.search(v),
        in_word=True,
    ),
    _Shape(
        "password",
        _PASSWORD_ANCHORS,
        _PASSWORD_WORD + f"(?:{_FOR_WHAT})?" + _IS + _VALUE,
        "value",
        _stated_password,
    ),
    _Shape(
        # "creds: admin / s3cret", "login is root:toor"
        "password",
        ("cred", "login"),
        r"(?<![A-Za-z])(?i:creds?|credentials|login)\s*(?:[:=]|\s(?i:is|are)\s)\s*[\w.@+\-]+\s*[/:]\s*"
        r"(?P<v>[^\s,;]{3,})",
        "v",
        _stated_password,
    ),
    _Shape(
        # curl -u user:password, mysql -u root -ps3cret
        "password",
        ("-u", "--user"),
        r"(?:-u|--user)[\s=]+[\"']?[\w.@+\-]+:(?P<v>[^\s\"'`]{3,})",
        "v",
        _stated_password,
    ),
    _Shape(
        "password",
        ("mysql",),
        r"mysql\b[^\n]*?\s-p(?P<v>[^\s\"'\-][^\s\"']{2,})",
        "v",
        _stated_password,
    ),
    _Shape(
        "password",
        ("passwd", "pwd"),
        r"(?<![A-Za-z])(?i:passwd|pwd)\s+" + _VALUE,
        "value",
        _strict_password,
    ),
    _Shape(
        # A token given to a command's login as its argument: wandb login <key>, with flags
        # and their values between (--host https://...); a host or a name is not one.
        "API key or token",
        ("login",),
        r"(?<=[a-z0-9]\s)login\s+(?:--?[A-Za-z][\w\-]*(?:[=\s]+(?!-)\S+)?\s+)*"
        r"(?P<t>[A-Za-z0-9_\-]{20,}={0,2})(?![\w.\-/:@=])",
        "t",
        lambda v: bool(re.fullmatch(r"[0-9a-fA-F]{32,}", v)) or _high_entropy(v),
    ),
    _Shape(
        "API key or token",
        ("key", "token", "secret"),
        _KEY_WORD + f"(?:{_FOR_WHAT})?" + _IS + _VALUE,
        "value",
        _stated_key,
    ),
)

# A URL (as cairn.core.redact reads them); its password and token-like query values are
# found by redact.url_secrets.
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s'\"<>`]*[^\s'\"<>`.,;:)\]}]")
# A candidate for the generic rule: a long run of token characters, not part of a longer one.
_TOKEN = re.compile(r"(?<![A-Za-z0-9_+/.\-])[A-Za-z0-9_+/\-]{20,}={0,2}(?![A-Za-z0-9_+/=.\-])")


def _span(shape: _Shape, match: re.Match[str]) -> tuple[int, int] | None:
    """Where the credential of ``match`` is, or None when its value is not a credential."""
    if shape.group == "value":
        group = "q" if match.group("q") is not None else "v"
        start, end = match.span(group)
        if group == "v":
            while end > start and match.string[end - 1] in _TRAILING:
                end -= 1
            cjk = _CJK.search(match.string, start + 1, end)
            if cjk is not None:
                end = cjk.start()  # "1Passwordの保管庫": the value ends where the words resume
    else:
        start, end = match.span(shape.group)
    value = match.string[start:end]
    if not value or (shape.check is not None and not shape.check(value)):
        return None
    if shape.kind in {"password", "API key or token"} and (
        said_of_something_else(match.string, match.start(), match.start() + 12)
        or not_a_value(value)
    ):
        return None
    return start, end


_CJK = re.compile(r"[\u3000-\u30ff\u3400-\u9fff\uac00-\ud7af\uff00-\uffef]")


# Path words after which the next parts of a URL are credentials: webhooks, bot tokens, keys.
_SECRET_PATH = re.compile(
    r"(?i)^(?:webhooks?|webhookb2|hooks?|incomingwebhook|trigger|triggers|integrations?|token"
    r"|tokens|keys?|secrets?|bot\d+:.*|services|(?:[\w-]*[_-])?" + _SIGN_IN + r")$"
)


def _in_path(url: str, offset: int, start: int, end: int) -> Iterator[Secret]:
    """The token-like parts of a URL's path that follow a word such as ``webhooks``."""
    at = url.find("/", start)
    if at < 0 or at >= end or "hooks.slack.com" in url[start:at]:
        return  # (a Slack webhook is masked whole by its shape)
    armed = False
    for part in re.finditer(r"[^/]+", url[at:end]):
        value = part.group()
        where = offset + at + part.start()
        if value.startswith("bot") and re.fullmatch(r"bot\d{6,}:[\w\-]{30,}", value):
            yield Secret("bot token in a URL", where, where + len(value))
        elif (
            armed
            and len(value) >= 16
            and (_long_random(value) or _HEX.fullmatch(value) or _high_entropy(value))
        ):
            yield Secret("token in a URL", where, where + len(value))
        armed = armed or _SECRET_PATH.match(value) is not None


def _in_urls(text: str) -> Iterator[Secret]:
    """The passwords and token-like query values of the URLs in ``text``."""
    for match in _URL.finditer(text):
        url, offset = match.group(0), match.start()
        values = url_secrets(url)
        after_scheme = url.find("://") + 3
        end = userinfo_end(url[after_scheme:])
        at = after_scheme + end if end >= 0 else -1
        host = at + 1 if at > 0 else after_scheme  # the query begins after the user info
        query = min(
            (i for i in (url.find("?", host), url.find("#", host)) if i >= 0), default=len(url)
        )
        host_end = url.find("/", after_scheme)
        user_end = url.find("@", after_scheme, host_end if host_end > 0 else query)
        if user_end > after_scheme and ":" not in url[after_scheme:user_end]:
            user = url[after_scheme:user_end]
            if len(user) >= 20 and (_long_random(user) or _HEX.fullmatch(user)):
                yield Secret("key in a URL", offset + after_scheme, offset + user_end)  # a DSN
        yield from _in_path(url, offset, after_scheme, query)
        for where, value in _sign_in_values(url, query):
            yield Secret("token in a URL", offset + where, offset + where + len(value))
        if not values:
            continue
        if at > after_scheme and ":" in url[after_scheme:at]:
            where = url.index(":", after_scheme) + 1
            password, values = url[where:at], values[1:]
            if _stated_password(password):
                yield Secret("connection string password", offset + where, offset + at)
        for value in values:
            where = url.find(value, query)
            if where >= 0 and (_long_random(value) or _stated_key(value)):
                yield Secret("token in a URL", offset + where, offset + where + len(value))


def _sign_in_values(url: str, query: int) -> Iterator[tuple[int, str]]:
    """The random query values of a sign-in, reset or invitation link, whatever their name
    (``/auth/magic?t=...``): where each is in ``url``, and the value."""
    if not _SIGN_IN_PATH.search(url, 0, query + 1):
        return
    for part in re.finditer(r"[?&;]([^=&#;]+)=([^&#;]+)", url[query:]):
        value = part.group(2)
        if len(value) >= 16 and (_long_random(value) or _high_entropy(value)):
            yield query + part.start(2), value


def _word_around(text: str, at: int) -> tuple[int, int]:
    """Where the white-space separated word that holds position ``at`` starts and ends."""
    start = at
    while start > 0 and not text[start - 1].isspace():
        start -= 1
    end = at
    while end < len(text) and not text[end].isspace():
        end += 1
    return start, end


# Every anchor of every shape, and for each the shapes it (or an anchor it begins with) starts.
_ANCHOR = re.compile(literal_alternation({a for shape in _SHAPES for a in shape.anchors}))
_SHAPES_AT: dict[str, tuple[tuple[int, _Shape], ...]] = {
    anchor: tuple(
        (rank, s) for rank, s in enumerate(_SHAPES) if any(anchor.startswith(a) for a in s.anchors)
    )
    for anchor in {a for shape in _SHAPES for a in shape.anchors}
}


def _matches(text: str, lowered: str) -> Iterator[tuple[_Shape, re.Match[str]]]:
    """The matches of every shape in ``text``, each tried only where one of its anchors is
    (anchors may overlap: "mot de passe" holds "pass"), in the order of :data:`_SHAPES`."""
    tries: list[tuple[int, int, _Shape]] = []
    found = _ANCHOR.search(lowered)
    while found is not None:
        tries += [(rank, found.start(), shape) for rank, shape in _SHAPES_AT[found.group()]]
        found = _ANCHOR.search(lowered, found.start() + 1)
    tries.sort(key=lambda t: t[:2])
    done: dict[int, int] = {}
    for rank, at, shape in tries:
        if at < done.get(rank, 0):
            continue  # inside this shape's previous match
        if shape.in_word:
            match = shape.pattern.search(text, *_word_around(text, at))
        else:
            match = shape.pattern.match(text, at)
        if match is not None:
            done[rank] = match.end()
            yield shape, match


def _long_words(text: str) -> Iterator[tuple[int, str]]:
    """The white-space separated words of ``text`` long enough to be a random token, with
    where each starts."""
    at = 0
    for word in text.split():
        if len(word) >= 20:
            at = text.find(word, at)
            yield at, word
            at += len(word)


def _library_rules() -> tuple[tuple[str, re.Pattern[str]], ...]:
    """detect-secrets' provider rules (docs/adr/0034): each pattern with the kind it finds.

    Left out: its private key rule (it finds the header only; the body is masked by the shape
    above), basic auth (URLs are read above), public IPs (not secrets), and the keyword and
    entropy rules, written for source files (chat has its own, above and below).
    """
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

    skipped = {"Private Key", "Basic Auth Credentials", "Public IP (ipv4)"}
    rules = []
    plugins: dict[str, Any] = get_mapping_from_secret_type_to_class()
    for kind, plugin in sorted(plugins.items()):
        if kind in skipped:
            continue
        for pattern in getattr(plugin, "denylist", ()):
            rules.append((kind, pattern))
    return tuple(rules)


_LIBRARY: tuple[tuple[str, re.Pattern[str]], ...] | None = None
# The library's rules all need a run of 16 token characters or more: a text without one (most
# chat) is not searched with them.
_LIBRARY_HINT = re.compile(r"[A-Za-z0-9_+/=.:\-]{16,}")
_TOKEN_CHAR = re.compile(r"[A-Za-z0-9_+/=\-]")


def warm() -> None:
    """Load what the detector loads on first use (detect-secrets and its rules: about a
    quarter of a second), so that a process that takes work pays it before its first message,
    not during it. Idempotent."""
    global _LIBRARY
    if _LIBRARY is None:
        _LIBRARY = _library_rules()


def _in_library(text: str) -> Iterator[Secret]:
    """What detect-secrets' provider rules find in ``text``, each widened to its whole token
    (a rule that stops at a character its provider never writes must not leave a tail)."""
    if _LIBRARY_HINT.search(text) is None:
        return
    if _LIBRARY is None:
        warm()
    assert _LIBRARY is not None
    for kind, pattern in _LIBRARY:
        for match in pattern.finditer(text):
            group = 1 if pattern.groups and match.group(1) else 0
            start, end = match.span(group)
            value = text[start:end]
            if len(value) < 12 or not any(c.isdigit() for c in value) or _classes(value) < 2:
                continue
            if kind == "Twilio API Key" and value.startswith("AC"):
                continue  # an account's SID: its name, not its key (those begin SK)
            while start > 0 and _TOKEN_CHAR.match(text[start - 1]):
                start -= 1
            while end < len(text) and _TOKEN_CHAR.match(text[end]):
                end += 1
            yield Secret(kind, start, end)


# Words before a random-looking string that make it an identifier or a public key, not a
# credential: Matrix's Megolm sessions, devices and keys, and ids named as such.
_ID_CONTEXT = re.compile(
    r"(?:\b(?i:megolm|session[ _-]?id|sender[ _-]?key|curve25519|ed25519|device[ _-]?(?:id|key)?"
    r"|room[ _-]?id|event[ _-]?id|request[ _-]?id|trace[ _-]?id|host[ _-]?id|fingerprint"
    r"|identity[ _-]?key|public[ _-]?key|checksum|digest|sha\d+|commit|txn[ _-]?id|base64,"
    r"|integrity|h1:|spki|pin-sha256|hash|md5|address|adresse|dirección|endereço|indirizzo"
    r"|wallet|txid|tx[ _-]?hash|etag|version[ _-]?id|object version|kid)"
    r"(?:\W{1,3}[^\s\[\]]{1,40}){0,6}"
    r"|(?:[a-z]Id|\bID)(?:\W{1,3}[^\s\[\]]{1,40})?)\W{0,3}$"
)
# A Matrix id's sigil: $event, !room, @user, #alias (the rest is an id, however random).
_SIGILS = "$!@#"


# A whole Matrix id: an event id of room version 4 and later ($ and 43 characters of
# url-safe base64), or a room, user or alias id on a server named as a host, "localhost" or
# an address (with a port or not). Homeservers make the random part; a rule that reads a
# credential word into it ("…2pW_…", "…PmDp:localhost") is reading chance.
_MATRIX_ID = re.compile(
    r"(?<![\w$!@#])(?:\$[A-Za-z0-9_\-]{43}(?![\w\-])"
    r"|[!@#][\w.=\-/+]{1,255}:(?:localhost|(?:[A-Za-z0-9\-]+\.)+[A-Za-z]{2,}"
    r"|\d{1,3}(?:\.\d{1,3}){3}|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?(?![\w.\-]))"
)


def _matrix_ids(text: str) -> list[tuple[int, int]]:
    """Where ``text`` holds Matrix ids (see :data:`_MATRIX_ID`)."""
    if not any(sigil in text for sigil in _SIGILS):
        return []
    return [m.span() for m in _MATRIX_ID.finditer(text)]


def _an_identifier(text: str, start: int) -> bool:
    """Whether the random-looking string at ``start`` is an identifier by what precedes it."""
    if start and text[start - 1] in _SIGILS:
        return True
    return _ID_CONTEXT.search(text, max(0, start - 120), start) is not None


# Three parts joined by dots, the first and last long: a signed token (Discord, JWT-like).
_SIGNED = re.compile(
    r"(?<![\w.\-])[A-Za-z0-9_\-]{20,}\.[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]{20,}(?![\w.\-])"
)


def _candidates(text: str) -> Iterator[Secret]:
    """Every secret a rule finds: those of URLs first, then each shape in turn, then the
    library's provider rules, the generic rule last (where two overlap,
    :func:`find_secrets` keeps the first)."""
    if "://" in text:
        yield from _in_urls(text)
    for shape, match in _matches(text, lowered(text)):
        span = _span(shape, match)
        if span is not None:
            yield Secret(shape.kind, *span)
    for kind, start, end in chat_secrets(text):
        yield Secret(kind, start, end)
    yield from _in_library(text)
    for match in _SIGNED.finditer(text):
        if any(_high_entropy(part) for part in match.group().split(".")):
            yield Secret("signed token", *match.span())
    for at, word in _long_words(text):
        if "://" in word:
            continue  # a document id in a link is not a credential; URL secrets are above
        if _ENCODED_MESSAGE.search(text, max(0, at - 60), at):
            continue  # an error's encoded message (AWS): for the decoder, not a credential
        for match in _TOKEN.finditer(word):
            start = at + match.start()
            if _high_entropy(match.group(0)) and not _an_identifier(text, start):
                yield Secret("high-entropy token", start, at + match.end())


# "Encoded authorization failure message: ...": an error's payload, decoded by the provider.
_ENCODED_MESSAGE = re.compile(r"(?i)encoded\s+(?:\w+\s+){0,3}message:?\s*$")
# Values that stand in for a password in examples and templates, and the words that say a
# text is one (in the languages people write them in).
_DEFAULT_VALUES = frozenset(
    """
    changeme change-me change_me changeit replace_me replaceme secret password pass example
    test xxx cambiame cámbiame cambialo cambiami mudar trocar aendern ändern changez-moi
    wijzigen zmien zmienmnie muuta ändra endre skift değiştir поменяй
    """.split()  # noqa: SIM905 (a word list reads best as prose)
)
_EXAMPLE_WORDS = re.compile(
    r"(?i)example|sample|placeholder|template|dummy|\bfake\b|beispiel|vorlage|exemple|modèle"
    r"|ejemplo|plantilla|exemplo|modelo|esempio|voorbeeld|przykład|пример|шаблон|örnek|mẫu"
    r"|giữ chỗ|contoh|例|サンプル|テンプレート|示例|模板|예시|샘플|\.dist\b|\.tmpl\b"
)


# A name for where a credential goes: YOUR_API_KEY_HERE, your-token, INSERT_KEY, <token>.
_PLACEHOLDER_NAME = re.compile(
    r"(?i)(?:your|my|insert|enter|replace|put)[_\-][\w\-]*|[\w\-]*[_\-](?:here|goes[_\-]here)"
    r"|<[^<>\s]+>"
)


# A value that says it is not one: xoxb-not-a-real-token, sk_test_fake_key.
_NOT_REAL = re.compile(r"(?i)not[-_]?a[-_]?real|[-_](?:fake|dummy|example|sample)[-_]|redacted")


def _jwt_io(value: str) -> bool:
    """Whether ``value`` is the sample token that jwt.io and its documentation show (its
    claims: sub 1234567890, name John Doe): an example known to everyone, not a credential."""
    if not value.startswith("eyJ") or value.count(".") != 2:
        return False
    payload = value.split(".")[1]
    try:
        claims = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)).decode("utf-8")
    except (binascii.Error, ValueError):
        return False
    return '"sub":"1234567890"' in claims and '"name":"John Doe"' in claims


# Six of one filler character in a row: a placeholder (XXXXXX, ******).
_FILLER = re.compile(r"([Xx*•#])\1{5,}")
_MARKER = re.compile(re.escape(SECRET_MARK) + r"[^\]\n]{0,80}\]")


# The zeros of the decimal digit sets people type besides ASCII (Arabic-Indic, Persian, N'Ko,
# Devanagari, Bengali, Gurmukhi, Gujarati, Oriya, Tamil, Telugu, Kannada, Malayalam, Sinhala,
# Thai, Lao, Tibetan, Myanmar, Khmer, Mongolian, full-width).
class _AsciiDigits(dict[int, int]):
    """A translation table from every decimal digit of Unicode (Arabic-Indic, Devanagari,
    Thai, full-width, Adlam, ...) to its ASCII digit, filled as characters are first seen:
    ``str.translate`` asks for each one, and a character that is no digit maps to itself."""

    def __missing__(self, code: int) -> int:
        digit = unicodedata.decimal(chr(code), None)
        found = self[code] = ord("0") + digit if digit is not None else code
        return found


_ASCII_DIGITS = _AsciiDigits()


def find_secrets(text: str) -> list[Secret]:
    """The credentials in ``text``, in order and not overlapping (where two rules find the
    same place, the more specific one names it). Never raises."""
    kept: list[Secret] = []
    public = public_spans(text)
    ids = _matrix_ids(text)
    if SECRET_MARK in text:
        # What was masked before stays as it is: its words are not read again.
        text = _MARKER.sub(lambda m: " " * len(m.group()), text)
    if not text.isascii():
        # A code in Arabic, Persian, Devanagari, Bengali, Thai or full-width digits is read as
        # the same code in ASCII digits ("٤٧٢٩" as "4729"); one character each, so every
        # place found is the same place in the text as written.
        text = text.translate(_ASCII_DIGITS)
    for secret in _candidates(text):
        if any(start <= secret.start and secret.end <= end for start, end in public):
            continue  # inside a certificate or a public key
        if any(start < secret.start and secret.end <= end for start, end in ids):
            continue  # read inside a Matrix id (a whole id after "password:" is still one)
        value = text[secret.start : secret.end]
        if value.endswith(("EXAMPLE", "EXAMPLEKEY")) or _FILLER.search(value) or _jwt_io(value):
            continue  # a documented example (AKIAIOSFODNN7EXAMPLE), a filler (sk_live_XXXX...)
        if _PLACEHOLDER_NAME.fullmatch(value) or _NOT_REAL.search(value):
            continue  # YOUR_API_KEY_HERE, <token>: a place to put one
        if value.strip("`'\"").casefold() in _DEFAULT_VALUES and _EXAMPLE_WORDS.search(text):
            continue  # "password: changeme" in a template or an example: a stand-in
        if text[max(0, secret.start - 3) : secret.start] == "pk." or value.startswith("pk_"):
            continue  # a publishable key: public by design
        if ui_string(text, secret.start):
            continue  # "Forgot your password?", „Gib dein Passwort ein“: words shown to users
        overlaps = [k for k in kept if k.start < secret.end and secret.start < k.end]
        if not overlaps:
            kept.append(secret)
        elif secret.start == overlaps[0].start and secret.end > overlaps[-1].end:
            # Two rules read one credential from the same place to different lengths
            # ("blossom" against "blossom announce avoid alone"): the longer reading is masked.
            for k in overlaps:
                kept.remove(k)
            kept.append(Secret(overlaps[0].kind, secret.start, secret.end))
    if kept and "\n" in text:
        kept += _wrapped_on(text, kept)
    if kept:
        kept += _said_again(text, kept)
    return sorted(kept, key=lambda s: s.start)


def _said_again(text: str, kept: list[Secret]) -> list[Secret]:
    """The same credential said again in the message ("the code is 5736, and 5736 again to
    arm"): each other place it stands as a word of its own."""
    taken = sorted((k.start, k.end) for k in kept)
    kinds = {text[k.start : k.end]: k.kind for k in kept}
    more: list[Secret] = []
    for value, kind in kinds.items():
        if len(value) < 4 or SECRET_MARK in value:
            continue
        for again in re.finditer(rf"(?<![\w.\-]){re.escape(value)}(?![\w\-])", text):
            start, end = again.span()
            at = bisect.bisect_left(taken, (end, end))  # the spans that start before its end
            if at and taken[at - 1][1] > start:
                continue  # overlaps one masked already
            bisect.insort(taken, (start, end))
            more.append(Secret(kind, start, end))
    return more


# A line that holds a single key-like word: what a terminal or an editor wrapped.
_KEY_LINE = re.compile(r"[ \t]*([A-Za-z0-9+/=_\-.!@#$%^&*?~]{6,})[ \t]*(?:\n|$)")


def _key_like(word: str) -> bool:
    """Whether a line's one word can carry a key on: digits, mixed case or length; not a
    plain word ("thanks")."""
    return (
        any(c.isdigit() for c in word)
        or len(word) >= 16
        or (any(c.isupper() for c in word[1:]) and any(c.islower() for c in word))
    )


def _wrapped_on(text: str, kept: list[Secret]) -> list[Secret]:
    """The lines that carry on a credential ending its line: each key-like line after it, up
    to the first line that is anything else."""
    more: list[Secret] = []
    for secret in kept:
        newline = text.find("\n", secret.end)
        if newline < 0 or text[secret.end : newline].strip():
            continue
        at = newline + 1
        while (line := _KEY_LINE.match(text, at)) is not None and line.end() > at:
            start, end = line.span(1)
            if not _key_like(line.group(1)):
                break
            if any(k.start < end and start < k.end for k in kept + more):
                break
            more.append(Secret(secret.kind, start, end))
            at = line.end()
    return more


# A word that could be part of a key or token: long enough, and not a plain word.
_PART = re.compile(r"[A-Za-z0-9_+/=.\-]{6,}")


def _part(word: str) -> bool:
    return _PART.fullmatch(word) is not None and (
        any(c.isdigit() for c in word) or word[0] in "._-" or len(word) >= 16
    )


def may_be_second_part(text: str) -> bool:
    """Whether ``text`` opens with what could be the rest of a credential begun in the
    message before it: a key-like word among its first three words, or the rest of one among
    its first six ("oh and the rest is ..."). Cheap, for deciding to read that message."""
    words = text.split(None, 6)[:6]
    return (
        any(_part(w.strip(",;:()[]\"'")) for w in words[:3])
        or any(len(w) >= 8 and _rest_of_a_secret(w) for w in words)
        or (len(text) < 80 and bare_code(text) is not None)  # "9 3 7 1" after "code coming"
        or _OPENS_WITH_CODE.match(text) is not None  # "2 9 0 6 then push the lever"
        or (len(text) < 200 and _ANSWER_LIKE.search(text, 0, 120) is not None)
    )


# What answers "what's the code?" in the next message: "same as before, 6413", "its Lbl-Pr1nt-3x",
# "new one is 7 3 5 2".
_ANSWER_LIKE = re.compile(
    r"(?<![\w.,:/\-])(?:\d{4,8}[#*]?|\d(?: \d){3,7}|(?=[^\s]*\d)(?=[^\s]*[A-Za-z])[^\s,;]{6,32})"
    r"(?![\w\-])"
)


_OPENS_WITH_CODE = re.compile(
    r"\s*(?:(?i:then|and then|i potem|a potem|potem|а далі|далі|а потом|потом|dann|puis|luego"
    r"|poi|depois)\s+\S*\d|\d(?:[ \-]\d){3,7}(?![\w\-])|\d{4,8}[#*]?(?![\w\-]))"
)


# A word of eight characters or more: what the rest of a credential would be.
_LONGISH = re.compile(r"\S{8,}")


def _rest_of_a_secret(word: str) -> bool:
    """Whether ``word`` could be the rest of a credential: 8 characters or more of letters
    and digits mixed, or of upper and lower case."""
    core = word.strip("._-,;:()[]\"'")
    return (len(core) >= 8 and (_classes(core) >= 2) and not core.isalpha()) or (
        len(core) >= 10 and any(c.isupper() for c in core[1:]) and any(c.islower() for c in core)
    )


def find_split(before: str, text: str) -> tuple[str, int, int, int, int] | None:
    """A credential split over two messages: its kind, where it starts and ends in ``before``
    (the message said just before, as stored) and where its part in ``text`` starts and
    ends, or None.

    The last key-like word of ``before`` (within its last 80 characters) joined to the first
    one of ``text`` (within its first 40, after a label such as "part 2:") is read as one
    text; a credential found across the join, but in neither message alone, is the split one.
    """
    marked = before.rfind(SECRET_MARK, max(0, len(before) - 60))
    if marked >= 0:
        # The message before ended with a credential already masked; this one opens with
        # more of it ("part 2: ...", "...and the rest is ..."): that whole word goes.
        rest = next(
            (m for m in re.finditer(r"\S+", text[:60]) if _rest_of_a_secret(m.group())), None
        )
        if rest is None and "PIN or code" in before[marked:]:
            rest = re.search(r"(?<![\w.,:/\-])\d{2,8}[#*]?(?![\w.,:/\-])", text[:40])
        if rest is not None:
            kind = before[marked + len(SECRET_MARK) :].split("]", 1)[0].strip() or "password"
            return kind, len(before), len(before), *rest.span()
    head = next((m for m in _PART.finditer(text, 0, 40) if _part(m.group())), None)
    if head is None:
        return None
    tail = [m for m in _PART.finditer(before, max(0, len(before) - 80)) if _part(m.group())]
    if not tail:
        return None
    last = tail[-1]
    start = max(0, last.start() - 200)
    joined = before[start : last.end()] + head.group()
    junction = last.end() - start
    for secret in find_secrets(joined):
        if secret.start < junction < secret.end:
            return secret.kind, start + secret.start, last.end(), head.start(), head.end()
    return None


def find_answered(before: str, text: str) -> list[Secret]:
    """The credentials ``text`` holds that only the message before it (``before``, as
    stored) makes readable: a password given under "login: qa_lead", codes under "backup
    codes?". Where each is in ``text``; empty when there is none."""
    tail = before[-300:]
    joined = f"{tail}\n{text}"
    offset = len(tail) + 1
    alone = find_secrets(text)
    found = [
        Secret(secret.kind, secret.start - offset, secret.end - offset)
        for secret in find_secrets(joined)
        if secret.start >= offset
        and not any(k.start < secret.end - offset and secret.start - offset < k.end for k in alone)
    ]
    if not found and not alone and SECRET_MARK not in tail:
        code = code_sent_after(tail, text) or _answer_to(tail, text)
        if code is not None:
            found.append(Secret("PIN or code", *code))
    return found


# A question for a code or a password, on the last line of a message.
_ASKS_FOR = re.compile(
    r"(?i)(?:code|pin|combo|combi|password|passcode|kod|cod|hasło|mdp)[^\n]*\?+[\"”’'»]?\s*$"
)


def _answer_to(before: str, text: str) -> tuple[int, int] | None:
    """Where the code is in ``text`` when ``before`` asked for one ("what's the med cabinet
    code at docklands?", then "3390 still, nobody changed it"): the first number of 4 to 8
    digits, or read out, near its start."""
    asked = _ASKS_FOR.search(before[-200:])
    if asked is None or _ASKS_OTHER.search(asked.group()):
        return None
    number = re.search(r"(?<![\w.,:/\-])(?:\d{4,8}[#*]?|\d(?: \d){3,7})(?![\w.,:/\-])", text[:60])
    if number is None or re.search(
        r"(?i)(?:\bpr|#|ticket|issue|order|ref|\bno|\bnr)\W{0,2}$", text[: number.start()]
    ):
        return None
    return number.span()


_ASKS_OTHER = re.compile(
    r"(?i)code ?review|(?:error|source|promo|discount|post|zip|area|tax|cost|shift|product|bar)"
    r" ?codes?|codebase"
)


def has_secret(text: str) -> bool:
    """Whether ``text`` holds any credential :func:`find_secrets` finds."""
    return bool(find_secrets(text))


def mask_secrets(text: str) -> tuple[str, list[str]]:
    """``text`` with each credential replaced by ``[secret removed: <kind>]``, and the kinds
    found (each once, in order of first appearance). Never raises."""
    secrets = find_secrets(text)
    if not secrets:
        return text, []
    parts: list[str] = []
    last = 0
    for secret in secrets:
        parts += [text[last : secret.start], removed(secret.kind)]
        last = secret.end
    parts.append(text[last:])
    return "".join(parts), list(dict.fromkeys(s.kind for s in secrets))


def mask_secrets_in(value: Any) -> tuple[Any, list[str]]:
    """A JSON-like ``value`` (tool arguments) with the credentials in every string masked, keys
    included, and the kinds found (each once). Other values are kept as they are."""
    kinds: list[str] = []

    def masked(item: Any) -> Any:
        if isinstance(item, str):
            text, found = mask_secrets(item)
            kinds.extend(found)
            return text
        if isinstance(item, dict):
            return {masked(str(k)): masked(v) for k, v in item.items()}
        if isinstance(item, list | tuple):
            return [masked(v) for v in item]
        return item

    return masked(value), list(dict.fromkeys(kinds))
