"""The issue's memo scenario through the Slack frontend: in thread A the ops agent learns that
deploys are frozen and memos the review agent; in thread B, asked to merge and deploy, the
review agent answers with the freeze. The real Bolt app on the Web API stand-in, the real
pipeline and in-process workers, the offline model, agents declared in cairn.toml."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlmodel import select

from cairn.db.models import AgentSession
from tests.integration.test_slack_frontend import mention
from tests.support.agents import FREEZE, declare_agents
from tests.support.slack_harness import running_slack


def test_ops_memos_review_in_one_thread_and_review_answers_with_it_in_another(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    declare_agents(clean_env)
    with running_slack(monkeypatch) as h:
        h.deliver(mention(f"ops: tell review that {FREEZE}", ts="1700000100.000100"))
        h.settle()
        (memo_sent,) = h.api.posts()
        assert memo_sent["thread_ts"] == "1700000100.000100"
        assert memo_sent["text"].startswith("Memo sent to review.")

        h.deliver(mention("review: can we merge and deploy PR 42?", ts="1700000200.000100"))
        h.settle()
        answer = h.api.posts()[-1]
        assert answer["thread_ts"] == "1700000200.000100"
        assert FREEZE in answer["text"]

        with h.pipeline.rt.db.session() as s:
            sessions = {x.thread_ref: x.agent for x in s.exec(select(AgentSession)).all()}
        assert sessions == {"1700000100.000100": "ops", "1700000200.000100": "review"}
