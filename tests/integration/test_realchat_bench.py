"""`cairn bench recall` reads real messaging-app chats as they are released (issue 31): hand-
written evidence, speakers' names as typed, turns that only share an image, per-turn times;
and reports recall per set and per category."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from cairn.bench.locomo import _turns, evidence_of, questions_of
from cairn.cli import main


def test_hand_written_evidence_is_normalised() -> None:
    def ids(*entries: str) -> set[str]:
        return evidence_of({"evidence": list(entries)})

    assert ids("D1:2", "D3:4") == {"D1:2", "D3:4"}
    assert ids("D13:4. D14:4") == {"D13:4", "D14:4"}
    assert ids("D2:1; D2:3", "D5:6,D5:7") == {"D2:1", "D2:3", "D5:6", "D5:7"}
    assert ids("D12:3-D12:5") == {"D12:3", "D12:4", "D12:5"}
    assert ids("D12:3-5", " D7 : 1 ") == {"D12:3", "D12:4", "D12:5", "D7:1"}
    assert ids("D17;39") == {"D17:39"}
    assert ids("D3:9-D4:2") == {"D3:9", "D4:2"}
    assert ids("", "see above") == set()


def _chat(folder: Path) -> Path:
    """A real chat in the release's format, with each of its quirks."""
    folder.mkdir()
    turn = {"img_file": [], "img_url": []}
    chat = {
        "name": {"speaker_1": "Emi", "speaker_2": "elise"},
        "session_1": [
            turn | {"clean_text": "Hey! How are you?", "speaker": "Emi",
                    "date_time": "29.12.2023, 22:42:04", "dia_id": "D1:1"},
            turn | {"clean_text": "Good! I just signed up for a pottery class in Brooklyn",
                    "speaker": "Elise", "date_time": "29.12.2023, 22:43:10", "dia_id": "D1:2"},
            {"clean_text": "", "speaker": "elise", "date_time": "29.12.2023, 22:44:00",
             "dia_id": "D1:3", "img_file": ["a.jpg"], "img_url": ["http://127.0.0.1/a.jpg"]},
            turn | {"clean_text": "Kate makes the best lasagna, I mean it", "speaker": "Emi",
                    "date_time": "29.12.2023, 22:45:00", "dia_id": "D1:4"},
        ],
        "events_session_1": {"agent_a": [], "agent_b": []},
        "session_2": [
            turn | {"clean_text": "The class starts tomorrow at 6!", "speaker": "elise",
                    "date_time": "02.01.2024, 09:01:00", "dia_id": "D2:1"},
            turn | {"clean_text": "x" * 2500 + ". Anyway, my brother moved to Denver.",
                    "speaker": "Emi", "date_time": "02.01.2024, 09:05:00", "dia_id": "D2:2"},
        ],
        "qa": [
            {"question": "Where does Elise take a pottery class?", "answer": "Brooklyn",
             "evidence": ["D1:2. D2:1"], "category": 1},
            {"question": "Where did Emi's brother move?", "answer": "Denver",
             "evidence": ["D2:2", ""], "category": 3},
            {"question": "What does Kate cook well?", "answer": "lasagna",
             "evidence": ["D1:4", "D1:9"], "category": 2},
            {"question": "Who sent a photo?", "answer": "Elise", "evidence": [""],
             "category": 1},
        ],
    }  # fmt: skip
    (folder / "Chat_1_Emi_Elise.json").write_text(json.dumps(chat))
    return folder


def test_a_real_chat_is_read_as_it_is(tmp_path: Path) -> None:
    record = json.loads((_chat(tmp_path / "realchat") / "Chat_1_Emi_Elise.json").read_text())
    turns = {dia: (text, when, speaker) for dia, text, when, _, speaker in _turns(record)}
    assert turns["D1:2"][2] == turns["D2:1"][2] == "Elise"  # one person, however typed
    assert turns["D1:3"][0] == "Elise: [shares an image]"
    assert turns["D2:1"][1].isoformat() == "2024-01-02T09:01:00+00:00"
    asked = questions_of(record)
    assert [q["evidence"] for q in asked] == [["D1:2", "D2:1"], ["D2:2"], ["D1:4"]]


def test_a_speaker_is_named_by_the_persona_the_annotations_give() -> None:
    def events(*said: str) -> dict[str, object]:
        return {"agent_a": [{"sub-event": s} for s in said], "agent_b": []}

    record = {
        "name": {"speaker_1": "Emi", "speaker_2": "elise"},
        "session_1": [{"clean_text": "I made pasta", "speaker": "Emi", "dia_id": "D1:1",
                       "date_time": "29.12.2023, 22:42:04", "img_url": []}],
        "events_session_1": events("Kate takes a cooking class.", "Kate makes pasta."),
        "events_session_2": events("Kate plans a ski trip.", "She rests."),
    }  # fmt: skip
    assert [line for _, line, *_ in _turns(record)] == ["Kate: I made pasta"]
    record["events_session_2"] = events("Emi rests.")
    assert [line for _, line, *_ in _turns(record)] == ["Emi: I made pasta"]  # two: too few


def test_bench_recall_reports_each_set_and_category(tmp_path: Path) -> None:
    from tests.integration.test_long_episodes import _conversation

    locomo = _conversation(tmp_path / "locomo")
    realchat = _chat(tmp_path / "realchat")
    result = CliRunner().invoke(
        main,
        ["bench", "recall", "--data", str(locomo), "--data", str(realchat), "--json",
         "--cv", "--k", "1,5"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    figures = json.loads(result.stdout)
    assert figures["methods"]["cairn"]["n"] == 4
    sets = figures["sets"]
    assert sets["locomo"]["methods"]["cairn"]["n"] == 1
    real = sets["realchat"]
    assert real["methods"]["cairn"]["n"] == 3
    assert set(real["by_category"]) == {"multi-hop", "commonsense", "temporal"}
    assert real["by_category"]["commonsense"]["cairn"]["recall@5"] == 1.0  # a long turn
    held_out = figures["cv"]["held_out"]
    assert set(held_out["by_set"]) == {"locomo", "realchat"}
    assert held_out["by_set"]["realchat"]["n"] == 3
    assert {f["held_out"] for f in figures["cv"]["folds"]} == {
        "locomo/long",
        "realchat/Chat_1_Emi_Elise",
    }
