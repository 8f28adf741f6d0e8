"""`cairn bench context --locomo` and `--plot`: the replay's shape, and the figures as PNGs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from cairn.cli import main

FACTS = [
    ("Ann", "I adopted a puppy and named him Rex after my grandfather."),
    ("Bob", "I started taking cello lessons with a strict teacher called Mrs Pell."),
    ("Ann", "My sister Clara is moving to Lisbon for a marine biology job."),
]
QUESTIONS = [
    ("What is the name of Ann's puppy?", ["D1:1"], 4),
    ("Who teaches Bob the cello?", ["D1:2"], 4),
    ("Where is Clara moving, and why?", ["D1:3"], 1),
]


def _conversation(folder: Path) -> Path:
    """One conversation: three facts first, then enough chatter to push them out of a small
    budget's transcript."""
    folder.mkdir()
    conversation: dict[str, object] = {"speaker_a": "Ann", "speaker_b": "Bob"}
    turns = [{"speaker": who, "dia_id": f"D1:{i}", "text": text}
             for i, (who, text) in enumerate(FACTS, 1)]  # fmt: skip
    conversation["session_1_date_time"] = "1:56 pm on 8 May, 2023"
    conversation["session_1"] = turns
    for n in range(2, 7):
        conversation[f"session_{n}_date_time"] = f"10:00 am on {n + 10} June, 2023"
        conversation[f"session_{n}"] = [
            {
                "speaker": "Ann" if i % 2 else "Bob",
                "dia_id": f"D{n}:{i}",
                "text": f"On walk {n}-{i} we talked about the weather, the allotment, the new "
                f"bakery on Elm street number {n * 100 + i} and whether the bus will be late "
                "again next week, and nothing much else happened that day.",
            }
            for i in range(1, 21)
        ]
    qa = [{"question": q, "evidence": e, "category": c, "answer": "-"} for q, e, c in QUESTIONS]
    (folder / "tiny.json").write_text(json.dumps({"conversation": conversation, "qa": qa}))
    return folder


@pytest.mark.slow
def test_the_locomo_replay_prints_every_mode_per_budget(tmp_path: Path) -> None:
    data = _conversation(tmp_path / "locomo")
    result = CliRunner().invoke(
        main,
        ["bench", "context", "--locomo", str(data), "--budget", "4000,8000", "--json",
         "--questions", "3"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    figures = json.loads(result.stdout)
    assert (figures["conversations"], figures["turns"], figures["questions"]) == (1, 103, 3)
    assert set(figures["budgets"]) == {"4000", "8000"}
    for row in figures["budgets"].values():
        for mode in ("engine", "classic", "recall"):
            assert 0.0 <= row[mode] <= 1.0
        for mode in ("engine", "classic"):
            cost = row["cost"][mode]
            assert cost["turns"] == 103
            assert cost["usd_per_100_turns"] > 0
    small = figures["budgets"]["4000"]
    # The facts were said 100 turns ago: out of a 4,000-token transcript, recalled by the
    # engine from memory.
    assert small["classic"] == 0.0
    assert small["engine"] >= small["classic"]
    assert small["recall"] > 0.0


@pytest.mark.slow
def test_plot_writes_a_png_of_the_thread(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    png = tmp_path / "context.png"
    result = CliRunner().invoke(
        main, ["bench", "context", "--turns", "60", "--json", "--plot", str(png)]
    )
    assert result.exit_code == 0, result.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads(result.output)["engine"]["cost"]["turns"] == 60


def test_plot_without_matplotlib_says_how_to_install_it(tmp_path: Path) -> None:
    # matplotlib hidden from a fresh interpreter, as on an install without the plot extra.
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text("import sys\nsys.modules['matplotlib'] = None\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(hide), *sys.path])}
    env["CAIRN_HOME"] = str(tmp_path / "home")
    done = subprocess.run(
        [sys.executable, "-m", "cairn", "bench", "context", "--turns", "50",
         "--plot", str(tmp_path / "x.png")],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode != 0
    assert "pip install 'cairn-bot[plot]'" in done.stdout + done.stderr
    assert not (tmp_path / "x.png").exists()


@pytest.mark.slow
def test_recall_plot_draws_k_up_to_20_and_prints_what_k_asked(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    data = _conversation(tmp_path / "locomo")
    png = tmp_path / "recall.png"
    result = CliRunner().invoke(
        main, ["bench", "recall", "--data", str(data), "--k", "5", "--json", "--plot", str(png)]
    )
    assert result.exit_code == 0, result.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    methods = json.loads(result.output)["methods"]
    assert set(methods["cairn"]) == {"recall@5", "n"}


def test_the_replay_compiles_classic_mode_from_the_same_transcript_the_log_holds(
    tmp_path: Path,
) -> None:
    from cairn.bench.context_locomo import _ReplayedClassic
    from cairn.db import Database
    from cairn.db.models import EventKind, SessionEvent
    from cairn.memory.context.classic import ClassicCompiler
    from cairn.sessions.log import EventLog, ThreadRef

    db = Database(f"sqlite:///{tmp_path / 'replay.db'}")
    db.migrate()
    log = EventLog(db)
    session = log.open_session(ThreadRef("locomo", "t", "locomo", "t"), "cairn")
    assert session.id is not None
    appended: list[SessionEvent] = []
    for i in range(40):
        appended.append(
            log.append(session.id, session.tenant_id, EventKind.MESSAGE,
                       text=f"turn {i}: the allotment, the bakery and bus {i} " * 8,
                       user="Ann" if i % 2 else "Bob", data={"addressed": False})
        )  # fmt: skip
    current = appended[-1]
    for budget in (1000, 3000, 100_000):
        fast = _ReplayedClassic(db, budget=budget, earlier=appended)
        slow = ClassicCompiler(db, budget=budget)
        assert fast.compile(session.id, current, system="frame") == slow.compile(
            session.id, current, system="frame"
        )
    db.dispose()


PETS = [
    "I adopted a grey cat called Miso from the shelter on Elm street.",
    "We also took in a rescue greyhound named Pilot last spring.",
    "My daughter keeps two guinea pigs, Salt and Pepper, in the garden hutch.",
    "There is a tortoise called Horace who is older than me, inherited from my aunt.",
    "Last month I adopted a parrot named Captain who says good morning.",
    "The goldfish Bubbles lives in a tank in the hall.",
    "A hedgehog we call Spike visits the garden; I leave him cat food.",
    "My son adopted a corn snake named Noodle for his birthday.",
]


@pytest.mark.slow
def test_a_question_with_many_old_evidence_turns_finds_them_in_recalled_memories(
    tmp_path: Path,
) -> None:
    """Eight old turns answer one question: more than a fixed memory share holds, so the engine
    finds them only when recalled memories take the room its other bands leave (ADR 0032)."""
    folder = tmp_path / "locomo"
    folder.mkdir()
    conversation: dict[str, object] = {"speaker_a": "Ann", "speaker_b": "Bob"}
    conversation["session_1_date_time"] = "1:56 pm on 8 May, 2023"
    conversation["session_1"] = [
        {"speaker": "Ann", "dia_id": f"D1:{i}", "text": text} for i, text in enumerate(PETS, 1)
    ]
    for n in range(2, 7):
        conversation[f"session_{n}_date_time"] = f"10:00 am on {n + 10} June, 2023"
        conversation[f"session_{n}"] = [
            {"speaker": "Ann" if i % 2 else "Bob", "dia_id": f"D{n}:{i}",
             "text": f"On walk {n}-{i} we talked about the weather, the allotment and whether "
                     f"the number {n * 100 + i} bus will be late again next week."}
            for i in range(1, 21)
        ]  # fmt: skip
    evidence = [f"D1:{i}" for i in range(1, len(PETS) + 1)]
    qa = [{"question": "Which animals and pets has Ann adopted or kept?", "evidence": evidence,
           "category": 1, "answer": "-"}]  # fmt: skip
    (folder / "pets.json").write_text(json.dumps({"conversation": conversation, "qa": qa}))
    result = CliRunner().invoke(
        main, ["bench", "context", "--locomo", str(folder), "--budget", "4000", "--json"]
    )
    assert result.exit_code == 0, result.output
    row = json.loads(result.stdout)["budgets"]["4000"]
    assert row["classic"] == 0.0  # 100 turns later: out of the transcript
    assert row["engine"] >= 0.875  # at least 7 of the 8
