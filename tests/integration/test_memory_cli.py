"""The `cairn memory` commands, `cairn session end` and the memory benchmarks, run as a person
would run them (through the click entry point, on the embedded default)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from cairn.cli import main
from cairn.core.settings import load_settings
from cairn.memory import Scope, Visibility
from cairn.runtime import build_runtime


def _run(*args: str, input: str | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args), input=input, catch_exceptions=False)
    return result.exit_code, result.output


def _seed() -> list[int]:
    rt = build_runtime(load_settings())
    try:
        scope = Scope("console", "cairn")
        ids = [
            rt.memory.remember(
                "Deploys are frozen until Monday", scope, kind="constraint"
            ).memory.id,
            rt.memory.remember(
                "The VPN is vpn.example.com", scope, visibility=Visibility.TEAM
            ).memory.id,
            rt.memory.remember("globex keeps its own secrets", Scope("globex", "cairn")).memory.id,
        ]
    finally:
        rt.close()
    return ids


def test_list_search_show_and_retract() -> None:
    frozen, vpn, _ = _seed()
    code, out = _run("memory", "list", "--json")
    assert code == 0
    assert {json.loads(line)["id"] for line in out.splitlines()} == {frozen, vpn}
    code, out = _run("memory", "search", "are deploys frozen?", "-k", "1", "--json")
    assert json.loads(out)["id"] == frozen
    code, out = _run("memory", "recall", "vpn", "-k", "1")  # the old name still works
    assert "vpn.example.com" in out
    code, out = _run("memory", "show", str(frozen), "--json")
    assert json.loads(out)["kind"] == "constraint"
    code, out = _run("memory", "retract", str(frozen), "--reason", "lifted", "--by", "ann")
    assert code == 0
    code, out = _run("memory", "list", "--kind", "constraint", "--json")
    assert out == ""
    code, out = _run("memory", "show", "3")  # another tenant's memory
    assert code == 1
    assert "no memory #3" in out


def test_export_import_gc_and_doctor(tmp_path: Path) -> None:
    _seed()
    dump = tmp_path / "console.jsonl"
    assert _run("memory", "export", "--tenant", "console", "-o", str(dump))[0] == 0
    assert len(dump.read_text().splitlines()) == 2
    code, out = _run("memory", "import", str(dump), "--tenant", "copy", "--move", "--json")
    assert json.loads(out) == {
        "imported": 2,
        "skipped": 0,
        "tenants": {"copy": 2},
        "rejected": [],
        "invalid": 0,
    }
    code, out = _run("memory", "list", "--tenant", "copy", "--json")
    assert len(out.splitlines()) == 2
    code, out = _run("memory", "gc", "--tenant", "console", "--json")
    assert json.loads(out)["counts"] == {"hot": 2, "warm": 0, "cold": 0}
    code, out = _run("memory", "doctor", "--json")
    assert code == 0
    findings = json.loads(out)
    assert findings["healthy"]
    assert findings["live_memories"] == findings["indexed"] == 5
    assert findings["embeddings"].startswith("minilm:")


def test_bulk_commands_require_a_tenant() -> None:
    result = CliRunner().invoke(main, ["memory", "export"])
    assert result.exit_code == 2
    assert "--tenant" in result.output


def test_session_end_of_an_unknown_thread_says_so() -> None:
    code, out = _run("session", "end", "no-such-thread")
    assert code == 1
    assert "no session for thread 'no-such-thread'" in out


def _locomo(folder: Path) -> Path:
    folder.mkdir()
    conversation = {
        "speaker_a": "Ann",
        "speaker_b": "Bob",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a puppy called Rex!"},
            {"speaker": "Bob", "dia_id": "D1:2", "text": "Congrats! I started learning the cello."},
        ],
        "session_2_date_time": "10:00 am on 20 June, 2023",
        "session_2": [
            {
                "speaker": "Ann",
                "dia_id": "D2:1",
                "text": "Look at this!",
                "blip_caption": "a photo of a mountain lake",
            },
            {"speaker": "Bob", "dia_id": "D2:2", "text": "My cello teacher is strict."},
        ],
    }
    qa = [
        {"question": "What is the name of Ann's puppy?", "evidence": ["D1:1"], "category": 4},
        {"question": "What instrument does Bob play?", "evidence": ["D1:2", "D2:2"], "category": 1},
        {"question": "Where did Ann hike?", "evidence": ["D2:1"], "category": 3},
        {"question": "Unanswerable?", "evidence": ["D1:1"], "category": 5},
    ]
    (folder / "tiny.json").write_text(json.dumps({"conversation": conversation, "qa": qa}))
    return folder


@pytest.mark.slow
def test_bench_recall_prints_every_method_side_by_side(tmp_path: Path) -> None:
    data = _locomo(tmp_path / "locomo")
    code, out = _run("bench", "recall", "--data", str(data), "--k", "1,2", "--json")
    assert code == 0
    result = json.loads(out)
    assert set(result["methods"]) == {"cairn", "bm25", "dense", "palaia", "pranor"}
    for method in result["methods"].values():
        assert method["n"] == 3  # category 5 is left out
        assert 0 <= method["recall@1"] <= method["recall@2"] <= 1
    # The two-evidence question caps recall@1 below 1; the puppy question is an easy hit.
    assert 0 < result["methods"]["cairn"]["recall@1"] < 1
    assert result["latency_ms"]["p95"] >= result["latency_ms"]["p50"] > 0


@pytest.mark.slow
def test_bench_recall_cv_scores_each_conversation_with_weights_chosen_on_the_others(
    tmp_path: Path,
) -> None:
    data = _locomo(tmp_path / "locomo")
    (data / "twin.json").write_text((data / "tiny.json").read_text())
    code, out = _run("bench", "recall", "--data", str(data), "--k", "1,2", "--cv", "--json")
    assert code == 0, out
    cv = json.loads(out)["cv"]
    for label in ("defaults", "in_sample", "held_out"):
        figures = cv[label]
        assert figures["n"] == 6  # three questions of categories 1-4 in each file
        assert 0 <= figures["recall@1"] <= figures["recall@2"] <= 1
        assert set(figures["by_category"]) == {"multi-hop", "open-domain", "single-hop"}
        assert figures["by_category"]["multi-hop"]["n"] == 2
    assert [fold["held_out"] for fold in cv["folds"]] == ["locomo/tiny", "locomo/twin"]
    assert all(fold["chosen"] in cv["grid"] for fold in cv["folds"])
    assert cv["in_sample"]["chosen"] in cv["grid"]
    assert len(cv["grid"]) > 1


def test_bench_recall_cv_needs_two_conversations(tmp_path: Path) -> None:
    data = _locomo(tmp_path / "locomo")
    code, out = _run("bench", "recall", "--data", str(data), "--cv", "--json")
    assert code != 0
    assert "--cv needs at least two conversation files" in out


@pytest.mark.slow
def test_bench_scale_reports_latency_and_throughput() -> None:
    code, out = _run("bench", "scale", "--memories", "300", "--queries", "5", "--json")
    assert code == 0
    size = json.loads(out)["sizes"]["300"]
    assert size["writes_per_s"] > 0
    assert size["search_with_embedding_ms"]["p50"] >= size["search_ms"]["p50"] > 0
