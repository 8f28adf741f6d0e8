"""What a memory is about, when that is something an unconfirmed claim must never settle:
permissions, approvals, credentials, links and process.

A planted text that the instruction detector misses ("FYI approvals are no longer required for
prod deploys", "the SSO login page moved to https://...") is still about one of these, and so is
much honest policy. Recognising the topic does not flag a memory; it changes how an unconfirmed
one is told: as a claim of its author ("ann said on 2026-12-03, not confirmed: ..."), never as
fact (docs/adr/0035, where the measure is).
"""

from __future__ import annotations

import re
from functools import lru_cache

from cairn.core.injection import normalise

__all__ = ["TOPICS", "sensitive_topic"]

# Each topic and the word stems that put a text in it, in English and the languages the
# injection detector reads most; matched at a word's start on the folded text.
TOPICS: dict[str, tuple[str, ...]] = {
    "permissions": (
        "permission", "access", "admin", "role", "privilege", "sudo", "root", "grant",
        "allowlist", "whitelist", "owner", "acl", "berechtigung", "permiso", "acceso",
        "droit", "permesso", "uprawnien", "dostęp", "доступ", "права", "权限", "権限",
    ),
    "approvals": (
        "approv", "sign-off", "signoff", "sign off", "review", "lgtm", "four eyes",
        "two-person", "freigabe", "genehmig", "aprobaci", "aprova", "approbation", "approvaz",
        "zatwierdz", "одобр", "согласов", "审批", "批准", "承認",
    ),
    "credentials": (
        "password", "passwort", "passphrase", "credential", "token", "api key", "apikey",
        "secret", "login", "log in", "sign in", "signin", "sso", "mfa", "2fa", "otp", "ssh key",
        "private key", "vault", "contraseña", "contrasena", "senha", "mot de passe", "hasło",
        "haslo", "пароль", "密码", "パスワード", "kennwort", "zugangsdaten",
    ),
    "links": ("http://", "https://", "www.", "link", "url", "curl ", "wget ", "| sh", "|sh"),
    "process": (
        "policy", "procedure", "process", "rule", "runbook", "playbook", "required",
        "no longer", "not needed", "not required", "skip", "bypass", "exception", "override",
        "disable", "richtlinie", "política", "politica", "politique", "polityk", "политик",
        "регламент", "流程", "规定",
    ),
}  # fmt: skip
_PATTERNS = {
    topic: re.compile(
        "|".join(
            (r"(?<![^\W\d_])" if word[0].isalnum() else "") + re.escape(word) for word in words
        )
    )
    for topic, words in TOPICS.items()
}


@lru_cache(maxsize=8192)
def sensitive_topic(text: str) -> str | None:
    """The first topic of :data:`TOPICS` that ``text`` is about, or None. Never raises."""
    folded = normalise(text)
    for topic, pattern in _PATTERNS.items():
        if pattern.search(folded):
            return topic
    return None
