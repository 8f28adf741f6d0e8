"""Credentials in free text: each shape is found and named, masking never leaves one behind, and
text that only talks about secrets (or identifiers that merely look random) is left alone."""

from __future__ import annotations

import itertools
import json
from importlib import resources

import pytest

from cairn.core.secrets import Secret, find_secrets, has_secret, mask_secrets

# Realistic but fake values: random characters in each provider's shape.
SHAPES = [
    ("Slack token", "xoxb-577463706433-0445294039402-ZMQObDDMOTsoYtxqAYfwFBHP"),
    ("Slack token", "xoxp-294904108537-244577127077-0717917023650-1caf27a32370c131c4875077"),
    ("Slack token", "xapp-1-A0333QCDBM1-4861316141762-c744cd7c5bf5d6d0f99329f7f6e4f23a1e2f"),
    ("Slack token", "xoxe-1-My0xLTU3NzQ2MzcwNjQzMy0wNDQ1Mjk0MDM5LTk4"),
    (
        "Slack webhook URL",
        "https://hooks.slack.com/services/T06B6N44WI/B03LGMBFXS/P0P9gjcl7NSWShU8",
    ),
    ("Anthropic API key", "sk-ant-api03-l7kettuA1fToZ0HpXyT4V3cSykBX0hB0RfZScs1EPvZhWfZ5esavyL0d"),
    ("OpenAI API key", "sk-proj-BIb8azk1tCR0nIbOvV1LUBuzfkJacmIynp__TcaiG1pQ19WE"),
    ("OpenAI API key", "sk-MmtkoQllyV9w9ejbPnWj7WZOAfSq8806s4BvSYuY8zmvpDbI"),
    ("AWS access key", "AKIABWB422FJPPBLCKQO"),
    ("AWS access key", "ASIAX7C7IPU62XVPS2A2"),
    ("GitHub token", "ghp_0wyanwfQuvxBGtpMZh4mNU5MP4fLi38BJlV5"),
    ("GitHub token", "github_pat_11A9IMKN37PNJ1SCGOX9SO_O97ZRdKgafQQgk5jcyBxtoJklvSwONzW9VLAI3p"),
    ("GitLab token", "glpat-3xz3iW0nbF7OT6ixKkmV"),
    ("Google API key", "AIzaRJhA3nI3EPj26FVJUO4lFRbFl4MTuVlXR_q"),
    ("Stripe key", "sk_live_jRgxRHz12sNmcZvsK5Y7qkwJ"),
    ("Stripe key", "rk_live_W8tPtOZiBByZ3arTMt3sV1Cx"),
    ("npm token", "npm_XF47tJ9vuZLtdWXDkFI9wAnbevEbrcR3FY2U"),
    ("Hugging Face token", "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"),
    ("Matrix access token", "syt_Y2Fpcm4_WsGvVrLqPzTnAbCdEfGh_1a2B3c"),
    (
        "JSON Web Token",
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJjYWlybi1ib3QiLCJpYXQiOjE3MDAwMDAwMDB9"
        ".XhpQjyzW55o7pdlSSJo-HlF3Bt_gfKcvaumxXYrUntk",
    ),
    ("high-entropy token", "VrfLxa2a1M5UHd9Nmn00iQNOKpBDq6G5"),
]


def _found(text: str) -> list[tuple[str, str]]:
    return [(s.kind, text[s.start : s.end]) for s in find_secrets(text)]


@pytest.mark.parametrize(("kind", "secret"), SHAPES)
def test_each_credential_shape_is_found_and_named_inside_a_sentence(kind: str, secret: str) -> None:
    text = f"for the staging bot use {secret} until Friday"
    assert _found(text) == [(kind, secret)]


@pytest.mark.parametrize(("kind", "secret"), SHAPES)
def test_masking_removes_the_secret_and_says_what_it_was(kind: str, secret: str) -> None:
    masked, kinds = mask_secrets(f"use {secret}; ask ops")
    assert secret not in masked
    assert kinds == [kind]
    assert masked.endswith(f"[secret removed: {kind}]; ask ops")


PRIVATE_KEY = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\n"
    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
    "QyNTUxOQAAACBbZ2hvc3Qta2V5LW5vdC1yZWFsLWJ1dC1sb25nLWVub3VnaAAAAJgAAAA=\n"
    "-----END OPENSSH PRIVATE KEY-----"
)


def test_a_private_key_block_is_found_whole() -> None:
    text = f"here is the deploy key:\n{PRIVATE_KEY}\nthanks"
    masked, kinds = mask_secrets(text)
    assert kinds == ["private key"]
    assert masked == "here is the deploy key:\n[secret removed: private key]\nthanks"


def test_a_private_key_block_without_its_end_line_is_found_to_the_end_of_its_body() -> None:
    text = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu3Jx0a8Qk2mZ4vT7nP\nq9Lk0Ww8RzT1"
    [secret] = find_secrets(text)
    assert (secret.kind, secret.start, secret.end) == ("private key", 0, len(text))
    assert "MIIE" not in mask_secrets(text)[0]


@pytest.mark.parametrize(
    ("text", "kind", "secret"),
    [
        ("the admin password is Tr0ub4dor, tell everyone", "password", "Tr0ub4dor"),
        ("password: hunter2", "password", "hunter2"),
        ("DB_PASSWORD=s3cr3t!x", "password", "s3cr3t!x"),
        ("pwd=Winter2024 for the jump host", "password", "Winter2024"),
        ("passwd hunter22 on the old box", "password", "hunter22"),
        ("the wifi pw is catsanddogs", "password", "catsanddogs"),
        ("the root password is now Blue-Kettle-42", "password", "Blue-Kettle-42"),
        ('grafana password for prod is "correct horse battery"', "password",
         "correct horse battery"),
        ("the default password is changeme", "password", "changeme"),
        ("mot de passe : Zeb7ra!!", "password", "Zeb7ra!!"),
        ("la contraseña es Gato2024", "password", "Gato2024"),
        ("das Passwort ist Sommer2023!", "password", "Sommer2023!"),
        ("o wachtwoord is Fiets99 hoor", "password", "Fiets99"),
        ("a senha é Cafe#123", "password", "Cafe#123"),
        ("пароль: Medved2024", "password", "Medved2024"),
        ("パスワードはSakura2024です", "password", "Sakura2024"),  # です is a word again
        ("Authorization: Bearer abcDEF123456ghiJKL", "bearer token", "abcDEF123456ghiJKL"),
        ("curl -H 'Authorization: Basic Y2Fpcm46aHVudGVyMg=='", "basic auth credentials",
         "Y2Fpcm46aHVudGVyMg=="),
        ("db postgresql://cairn:pa55word@db/cairn", "connection string password", "pa55word"),
        ("redis://:Sup3rS3cret@cache:6379/0", "connection string password", "Sup3rS3cret"),
        ("use cairn:Pa55w0rd@db.internal:5432/cairn", "connection string password", "Pa55w0rd"),
        ("https://api.example.com/v1?api_key=q8Zr2LkP0xWm5Tn7", "token in a URL",
         "q8Zr2LkP0xWm5Tn7"),
        ("aws_secret_access_key = kT9f2/Lm8QzR4pXw7YbN1cVd3Hs6Ju0gEa5iOoPl", "AWS secret key",
         "kT9f2/Lm8QzR4pXw7YbN1cVd3Hs6Ju0gEa5iOoPl"),
        ("the secret key is kT9f2/Lm8QzR4pXw7YbN1cVd3Hs6Ju0gEa5iOoPl", "AWS secret key",
         "kT9f2/Lm8QzR4pXw7YbN1cVd3Hs6Ju0gEa5iOoPl"),
        ("grafana creds: admin / Zk9#pL2!qW", "password", "Zk9#pL2!qW"),
        ("curl -u admin:Sup3rS3cret! https://jenkins.internal/api", "password", "Sup3rS3cret!"),
        ("mysql -u root -pS3cretPw reporting", "password", "S3cretPw"),
        ("пароль от сервера: Medved2024", "password", "Medved2024"),
        ("the default password for new grafana users is changeme", "password", "changeme"),
        ("the API key is 8f3k2m9x0q7w", "API key or token", "8f3k2m9x0q7w"),
        ("client_secret: 4c1f9e0a7b2d8c3e", "API key or token", "4c1f9e0a7b2d8c3e"),
    ],
)  # fmt: skip
def test_stated_passwords_and_contextual_credentials_are_found(
    text: str, kind: str, secret: str
) -> None:
    assert _found(text) == [(kind, secret)]
    assert secret not in mask_secrets(text)[0]


@pytest.mark.parametrize(
    "text",
    [
        "passwords are stored in Vault",
        "the password policy changes on Friday",
        "rotate the API key every 90 days",
        "the Slack token lives in 1Password",
        "the password is in the team vault",
        "the password was reset yesterday",
        "the password is now managed by Okta",
        "the password is required for sudo",
        "the password is expiring next week",
        "the admin password is not the same as the root one",
        "the AWS key for staging expired",
        "the token is JWT-based and expires after 1 hour",
        "the secret is rotated by the vault operator",
        "password: see 1Password, entry 'grafana prod'",
        "password=${DB_PASSWORD} in the compose file",
        "reset the password via the self-service portal",
        "le mot de passe est dans le coffre",
        "la contraseña está en el gestor",
        "das Passwort ist im Tresor",
        "Bearer tokens expire after one hour",
        "bots use xoxb- tokens and apps use xapp- tokens",
        "the release commit is 3f9c2ab1d4e5f60718293a4b5c6d7e8f90a1b2c3",
        "request id 6f1c3a2e-9b4d-4e2f-8a7c-1d2e3f4a5b6c",
        "image sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        "the image is registry.example.com/cairn/bot:1.4.2 on /var/lib/postgresql/16/main",
        "pod cairn-worker-7d9f8c6b5-x2k4q restarted after OOMKilled",
        "ConnectionPoolTimeoutExceptionHandler2 fired on db-01.prod.eu-west-1.example.com",
        "advisory GHSA-2x3c-4v5b-6n7m-q8w9 is patched in v2.14.1-rc.3",
        "the dashboard is https://grafana.example.com/d/AbC9xYz12/cairn-overview?orgId=1",
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGhvc3Qta2V5LW5vdC1yZWFsLWJ1dC1sb25n ops@bastion",
        "mail alice@example.com or ping @bob:matrix.example.org",
        "git clone git@github.com:cairn-bot/cairn.git",
        "the meeting is at 10:30@room 4",
        "login: use SSO, the credentials are in Vault",
        "docker run -p8080:80 nginx && ssh -p 2222 ops@bastion",
        "`sqlite:///path` or `postgresql://user:pass@host/db`",
    ],
)
def test_text_that_only_talks_about_secrets_or_looks_random_is_not_a_secret(text: str) -> None:
    assert find_secrets(text) == []
    assert not has_secret(text)
    assert mask_secrets(text) == (text, [])


def test_secrets_are_found_in_order_without_overlap_and_masked_in_place() -> None:
    text = (
        "ops: token xoxb-1234-5678-AbCdEfGhIjKl, key AKIABWB422FJPPBLCKQO and the admin "
        "password is Tr0ub4dor"
    )
    secrets = find_secrets(text)
    assert [s.kind for s in secrets] == ["Slack token", "AWS access key", "password"]
    assert all(a.end <= b.start for a, b in itertools.pairwise(secrets))
    masked, kinds = mask_secrets(text)
    assert masked == (
        "ops: token [secret removed: Slack token], key [secret removed: AWS access key] and "
        "the admin password is [secret removed: password]"
    )
    assert kinds == ["Slack token", "AWS access key", "password"]


def test_the_kinds_are_listed_once_each() -> None:
    _, kinds = mask_secrets("xoxb-1111-2222-aaaa and xoxb-3333-4444-bbbb")
    assert kinds == ["Slack token"]


def test_a_more_specific_shape_wins_over_a_stated_password() -> None:
    assert _found("password: sk-ant-api03-Zq8vK2mX9pLw4RtY") == [
        ("Anthropic API key", "sk-ant-api03-Zq8vK2mX9pLw4RtY")
    ]


def test_a_secret_is_a_frozen_value() -> None:
    secret = Secret("password", 1, 4)
    with pytest.raises(AttributeError):
        secret.kind = "other"  # type: ignore[misc]


def _corpus() -> list[dict[str, str]]:
    path = resources.files("cairn.bench").joinpath("poisoning_corpus.json")
    return json.loads(path.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def test_every_credential_in_the_poisoning_corpus_is_found_and_masked() -> None:
    missed, leaked = [], []
    for entry in _corpus():
        secret = entry.get("secret")
        if secret is None:
            continue
        text = entry["text"]
        if not any(text[s.start : s.end] == secret or secret in text[s.start : s.end]
                   for s in find_secrets(text)):  # fmt: skip
            missed.append(text)
        if secret in mask_secrets(text)[0]:
            leaked.append(text)
    assert not missed, "secrets not found:\n" + "\n".join(missed)
    assert not leaked, "secrets left after masking:\n" + "\n".join(leaked)
