"""Learnings a weak model writes as broken JSON are asked for once more, and never lost without a
word: the real openai SDK against ChatServer."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from cairn.llm.openai import OpenAILLM
from cairn.memory.learnings import RETRY_PROMPT, Learning, extract_learnings
from tests.support.chat_server import ChatServer

TRANSCRIPT = "ann: we agreed that deploys happen on Tuesdays only\ncairn (bot): noted"
GOOD = '[{"kind": "decision", "text": "Deploys happen on Tuesdays only."}]'
BROKEN = '[{"kind": "decision", "text": "Deploys happen on Tuesdays only."]'


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with ChatServer(api_key=None) as srv:
        yield srv


def _llm(server: ChatServer) -> OpenAILLM:
    return OpenAILLM("", "tiny", base_url=server.base_url, max_retries=0)


def test_an_unreadable_answer_is_logged_with_its_reason_and_asked_again(
    server: ChatServer, caplog: pytest.LogCaptureFixture
) -> None:
    server.push_text("Sure! Here they are: " + BROKEN)
    server.push_text(GOOD)

    found = extract_learnings(_llm(server), TRANSCRIPT)

    assert found == [Learning("decision", "Deploys happen on Tuesdays only.")]
    assert "learnings answer unreadable (the list is not valid JSON" in caplog.text
    retry = server.chat_bodies[1]["messages"]
    assert retry[-1]["content"].startswith(RETRY_PROMPT)
    assert retry[-2] == {"role": "assistant", "content": "Sure! Here they are: " + BROKEN}


def test_an_answer_unreadable_twice_is_reported_as_lost(
    server: ChatServer, caplog: pytest.LogCaptureFixture
) -> None:
    server.push_text("I think the team decided on Tuesdays.")
    server.push_text(BROKEN)
    server.push_text(GOOD)  # never asked for: one retry only

    with caplog.at_level(logging.WARNING):
        found = extract_learnings(_llm(server), TRANSCRIPT)

    assert found == []
    assert "no JSON list in the answer" in caplog.text
    lost = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(lost) == 1
    assert "learnings lost" in lost[0].getMessage()
    assert len(server.chat_bodies) == 2


def test_an_empty_list_is_an_answer_not_a_failure(server: ChatServer) -> None:
    server.push_text("[]")

    assert extract_learnings(_llm(server), TRANSCRIPT) == []
    assert len(server.chat_bodies) == 1
