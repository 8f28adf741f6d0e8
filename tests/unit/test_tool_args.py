"""Tool arguments: one pydantic model per tool gives the schema the model sees and the checks."""

from __future__ import annotations

import json

import pytest

from cairn.core.errors import InvalidInput
from cairn.workers.tool_args import (
    ARGUMENTS,
    CONTEXT_TOOL_SPECS,
    MEMO_TOOL_SPECS,
    SCRATCHPAD_TOOL_SPECS,
    TOOL_SPECS,
    AddDecision,
    Recall,
    Remember,
    Retract,
    RetrieveArtifact,
    SendMemo,
    ToolArgs,
    parse,
)

SPECS = TOOL_SPECS + CONTEXT_TOOL_SPECS + MEMO_TOOL_SPECS + SCRATCHPAD_TOOL_SPECS


def test_every_tool_has_one_model_and_a_plain_object_schema() -> None:
    assert sorted(ARGUMENTS) == sorted(spec.name for spec in SPECS)
    for spec in SPECS:
        text = json.dumps(spec.input_schema)
        assert spec.input_schema["type"] == "object", spec.name
        # No pydantic clutter and no invitation to send null: the schema reads as if by hand.
        for noise in ('"title"', '"anyOf"', '"null"', '"$defs"', '"$ref"'):
            assert noise not in text, (spec.name, noise)


def test_the_schema_keeps_names_descriptions_required_fields_and_limits() -> None:
    recall, send = Recall.spec().input_schema, SendMemo.spec().input_schema
    assert recall["required"] == ["query"]
    assert recall["properties"]["k"] == {"type": "integer", "minimum": 1, "maximum": 20}
    assert send["required"] == ["to", "text"]
    assert send["properties"]["expires_in_hours"] == {"type": "number", "exclusiveMinimum": 0}
    assert send["properties"]["to"]["description"] == "Agent name, or * for all agents."
    remember = Remember.spec().input_schema["properties"]
    assert remember["kind"]["enum"][0] == "fact"
    assert remember["kind"]["default"] == "fact"
    assert "rationale" in AddDecision.spec().input_schema["properties"]


def test_good_input_is_parsed_and_unknown_fields_are_ignored() -> None:
    args = parse(SendMemo, {"to": "review", "text": "freeze", "expires_in_hours": 2, "x": 1})
    assert (args.to, args.priority, args.expires_in_hours) == ("review", 0, 2.0)
    assert parse(Retract, {"memory_id": 3}).query is None


def test_numbers_the_tools_always_clamped_are_still_clamped() -> None:
    assert parse(Recall, {"query": "x", "k": 50}).k == 20
    assert parse(Recall, {"query": "x", "k": 0}).k == 1
    assert parse(RetrieveArtifact, {"id": "a", "limit": 100_000}).limit == 20000


@pytest.mark.parametrize(
    ("args", "arguments", "says"),
    [
        (Recall, {}, "recall got bad input: query: Field required"),
        (Recall, {"query": "  "}, "query: should be a non-empty string"),
        (Recall, {"query": "x", "k": "5"}, "k: Input should be a valid integer"),
        (Remember, {"text": "x", "kind": "rumour"}, "kind: should be one of"),
        (Remember, {"text": "x", "share_with_team": "yes"}, "share_with_team: Input should be"),
        (SendMemo, {"to": "a", "text": "b", "expires_in_hours": 0}, "greater than 0"),
    ],
)
def test_bad_input_is_an_error_that_names_the_field(
    args: type[ToolArgs], arguments: dict[str, object], says: str
) -> None:
    with pytest.raises(InvalidInput, match=says):
        parse(args, arguments)
