"""Every memory write refuses a credential, and names its kind without repeating it."""

from __future__ import annotations

import pytest

from cairn.core.errors import InvalidInput
from cairn.core.secrets import mask_secrets
from cairn.memory.records import checked_memory

TOKEN = "xoxb-2048-1111-" + "q7WmZp3Lr8Tn2Vx5Ky9Bd4Hs"


@pytest.mark.parametrize(
    ("text", "named"),
    [
        (f"the bot token is {TOKEN}", "(Slack token)"),
        ("the admin password is Tr0ub4dor&3x", "(password)"),
        (mask_secrets("the admin password is Tr0ub4dor&3x")[0], "removed from the message"),
        ("what [secret removed: was here", "looks like a secret."),
    ],
)
def test_a_secret_is_refused_by_kind_and_never_repeated(text: str, named: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        checked_memory(text, "fact")
    message = str(refused.value)
    assert message.startswith("not stored: it holds what looks like a secret")
    assert named in message
    assert "rotate it" in message
    assert TOKEN not in message
    assert "Tr0ub4dor" not in message


def test_talk_about_secrets_is_a_memory() -> None:
    text = "the Slack token lives in 1Password and is rotated every 90 days"
    assert checked_memory(text, "fact") == text
