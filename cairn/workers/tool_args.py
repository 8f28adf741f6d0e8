"""What each tool takes: one pydantic model per tool, whose JSON schema is what the model sees.

A tool's ``input_schema`` is generated from its model (without titles, and with an optional
field shown as its plain type rather than "this or null"), and :func:`parse` checks the
arguments the model sent against the same model, so the schema and the checks cannot drift.
Validation is strict: a value of the wrong type is an error naming the field, never coerced
or silently replaced by a default. Where the tools always clamped a number (recall's ``k``, an
artifact page's ``offset`` and ``limit``) they still do; other limits are errors. Fields the
schema does not name are ignored.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Annotated, Any, ClassVar, Literal, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import PydanticCustomError, core_schema

from cairn.core.bounded import ID_MAX
from cairn.core.errors import InvalidInput
from cairn.llm.types import ToolSpec
from cairn.memory.records import MEMORY_KINDS

__all__ = [
    "ARGUMENTS",
    "CONTEXT_TOOL_SPECS",
    "MEMO_TOOL_SPECS",
    "SCRATCHPAD_TOOL_SPECS",
    "TOOL_SPECS",
    "AckMemo",
    "AddItem",
    "Recall",
    "Remember",
    "Retract",
    "RetrieveArtifact",
    "ScratchpadKey",
    "ScratchpadWrite",
    "SearchArtifact",
    "SendMemo",
    "ShareMemory",
    "ToolArgs",
    "UpdateItem",
    "parse",
]


def _non_blank(value: str) -> str:
    if not value.strip():
        raise PydanticCustomError("blank", "should be a non-empty string")
    return value


def _one_of(choices: Collection[str]) -> AfterValidator:
    def check(value: str) -> str:
        if value not in choices:
            raise PydanticCustomError("enum", "should be one of {choices}", {"choices": choices})
        return value

    return AfterValidator(check)


def _clamp(low: int, high: int) -> AfterValidator:
    return AfterValidator(lambda value: max(low, min(high, value)))


# A string with something in it besides whitespace (the schema says "string", as it did).
NonBlank = Annotated[str, AfterValidator(_non_blank)]
# How many memories recall returns, and a page of an artifact: asking for more (or less) than
# the limits gets the nearest limit, not an error (as before the models).
RecallK = Annotated[int, Field(json_schema_extra={"minimum": 1, "maximum": 20}), _clamp(1, 20)]
PageLimit = Annotated[
    int, Field(json_schema_extra={"minimum": 1, "maximum": 20000}), _clamp(1, 20000)
]
# A row's id: what a 64-bit column holds (docs/adr/0037); a larger one is an error to the model.
RowId = Annotated[int, Field(ge=1, le=ID_MAX)]


class ToolArgs(BaseModel):
    """The arguments of one tool; ``tool`` and ``about`` are its name and description."""

    model_config = ConfigDict(strict=True, frozen=True)

    tool: ClassVar[str]
    about: ClassVar[str]

    @classmethod
    def spec(cls) -> ToolSpec:
        """The tool as the model sees it."""
        schema = cls.model_json_schema(schema_generator=_PlainSchema)
        schema.pop("title", None)
        schema.pop("description", None)  # the class docstring is for people, not the model
        return ToolSpec(name=cls.tool, description=cls.about, input_schema=schema)


A = TypeVar("A", bound=ToolArgs)


class _PlainSchema(GenerateJsonSchema):
    """pydantic's schema less what would only clutter a tool's input schema."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False

    def nullable_schema(self, schema: core_schema.NullableSchema) -> JsonSchemaValue:
        # None stands for "not given": the model is never invited to send null.
        return self.generate_inner(schema["schema"])

    def default_schema(self, schema: core_schema.WithDefaultSchema) -> JsonSchemaValue:
        if schema.get("default") is None:
            return self.generate_inner(schema["schema"])
        return super().default_schema(schema)


def parse(args: type[A], arguments: dict[str, Any]) -> A:
    """``arguments`` checked against ``args``; InvalidInput names each field that is wrong."""
    try:
        return args.model_validate(arguments)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc']) or 'input'}: {error['msg']}"
            for error in exc.errors(include_url=False)
        )
        raise InvalidInput(f"{args.tool} got bad input: {problems}") from exc


class Remember(ToolArgs):
    """remember: a durable memory, private unless shared with the team."""

    tool = "remember"
    about = (
        "Store a durable fact, preference, decision, pattern, mistake or constraint in "
        "long-term memory so that it can be recalled in later threads. Write it as one "
        "self-contained sentence. People are shown a 'remembered: ...' notice."
    )
    text: NonBlank = Field(description="The memory, one sentence.")
    kind: Annotated[str, _one_of(MEMORY_KINDS)] = Field(
        "fact", json_schema_extra={"enum": list(MEMORY_KINDS)}
    )
    share_with_team: bool = Field(
        False, description="True to make it visible to every agent of this workspace."
    )


class Recall(ToolArgs):
    """recall: a search of long-term memory; ``k`` None is the store's default."""

    tool = "recall"
    about = "Search long-term memory for what is relevant to a query."
    query: NonBlank
    k: RecallK | None = None


class ShareMemory(ToolArgs):
    """share_memory: one private memory made the team's."""

    tool = "share_memory"
    about = (
        "Share one of your private memories with every agent of this workspace, by its id "
        "(from recall). Sharing is recorded (who, when) and can be undone by people."
    )
    memory_id: RowId


class Retract(ToolArgs):
    """retract: by id, else by the best match for a query (one of the two is needed)."""

    tool = "retract"
    about = (
        "Retract a memory that is wrong or outdated, by its id (from recall) or by a query "
        "matching it. Retracted memories are kept for audit but never recalled."
    )
    memory_id: RowId | None = None
    query: NonBlank | None = None
    reason: str | None = None


class AddItem(ToolArgs):
    """add_<kind>: an item of the thread's state graph; ``kind`` is set by each subclass."""

    kind: ClassVar[str]
    text: NonBlank


def _item_about(what: str) -> str:
    return (
        f"Record {what} in this thread's state, which is kept in every later prompt of the "
        "thread (it does not go to long-term memory). Returns its id (e.g. C1) for update_item."
    )


class AddConstraint(AddItem):
    """add_constraint."""

    tool, kind = "add_constraint", "constraint"
    about = _item_about("a constraint people set (a rule that must hold, never dropped)")
    text: NonBlank = Field(description="The constraint.")


class AddDecision(AddItem):
    """add_decision, the one item with a rationale."""

    tool, kind = "add_decision", "decision"
    about = _item_about("a decision taken, with its rationale")
    text: NonBlank = Field(description="The decision.")
    rationale: str | None = Field(None, description="Why it was decided.")


class AddTask(AddItem):
    """add_task."""

    tool, kind = "add_task", "task"
    about = _item_about("an open task of the plan")
    text: NonBlank = Field(description="The task.")


class AddNote(AddItem):
    """add_note."""

    tool, kind = "add_note", "note"
    about = _item_about("a note worth keeping while the thread goes on")
    text: NonBlank = Field(description="The note.")


class UpdateItem(ToolArgs):
    """update_item: what is given changes; None leaves a field as it is."""

    tool = "update_item"
    about = (
        "Update an item of this thread's state by its id: mark a task done, drop an item "
        "that no longer holds (only when people said so), or correct its text."
    )
    id: NonBlank = Field(description="The item's id, e.g. T2.")
    status: Literal["open", "done", "dropped"] | None = None
    text: str | None = None
    rationale: str | None = None


class RetrieveArtifact(ToolArgs):
    """retrieve_artifact: one page of an artifact's text."""

    tool = "retrieve_artifact"
    about = (
        "Read the full text behind an artifact card (a distilled paste or tool output) by "
        "its id, in pages: pass next_offset from the previous page to read on."
    )
    id: NonBlank = Field(description="The artifact id from the card.")
    offset: int = Field(0, json_schema_extra={"minimum": 0})  # the engine reads from 0 at least
    limit: PageLimit = 8000


class SearchArtifact(ToolArgs):
    """search_artifact: the lines of an artifact that match a query."""

    tool = "search_artifact"
    about = (
        "Find the lines of an artifact (a distilled paste, an attached file, tool output) "
        "that hold the words of a query: an id, an error, a time. Returns each line with its "
        "number, those holding the most of the words first; read around one with "
        "retrieve_artifact."
    )
    id: NonBlank = Field(description="The artifact id from the card.")
    query: NonBlank = Field(description="Words, ids or a phrase to look for.")
    limit: RecallK = 10


class SendMemo(ToolArgs):
    """send_memo: to one agent of the workspace or to all."""

    tool = "send_memo"
    about = (
        "Send a memo to another agent of this workspace (or to all of them with to='*'). "
        "It reaches the recipient's next prompt in any of its threads. Use it to hand over "
        "knowledge another agent needs, e.g. a freeze, an incident, a decision."
    )
    to: NonBlank = Field(description="Agent name, or * for all agents.")
    text: NonBlank
    priority: int = Field(0, ge=-10, le=10)
    expires_in_hours: float | None = Field(None, gt=0)


class AckMemo(ToolArgs):
    """ack_memo."""

    tool = "ack_memo"
    about = "Acknowledge a memo you were shown once you have dealt with it."
    memo_id: RowId


class ScratchpadWrite(ToolArgs):
    """scratchpad_write: a key (stripped) and its new value."""

    tool = "scratchpad_write"
    about = (
        "Write a value under a key in your scratchpad for this session: working notes "
        "such as intermediate results, ids to come back to or where a multi-step job got "
        "to. Writing a key again replaces it. The scratchpad is volatile (it expires after a "
        "while unused) and is not shown in your prompt: read it back with scratchpad_read. "
        "For what must last, use remember."
    )
    key: NonBlank = Field(description="A short name, e.g. 'rollback_plan'.")
    value: str


class ScratchpadKey(ToolArgs):
    """scratchpad_read."""

    tool = "scratchpad_read"
    about = "Read the value under a key of your scratchpad for this session."
    key: NonBlank


class ScratchpadList(ToolArgs):
    """scratchpad_list: no arguments."""

    tool = "scratchpad_list"
    about = "List the keys of your scratchpad for this session, with a preview of each."


_MEMORY: tuple[type[ToolArgs], ...] = (Remember, Recall, ShareMemory, Retract)
_CONTEXT: tuple[type[ToolArgs], ...] = (
    AddConstraint,
    AddDecision,
    AddTask,
    AddNote,
    UpdateItem,
    RetrieveArtifact,
    SearchArtifact,
)
_MEMOS: tuple[type[ToolArgs], ...] = (SendMemo, AckMemo)
_SCRATCHPAD: tuple[type[ToolArgs], ...] = (ScratchpadWrite, ScratchpadKey, ScratchpadList)

TOOL_SPECS = tuple(args.spec() for args in _MEMORY)
CONTEXT_TOOL_SPECS = tuple(args.spec() for args in _CONTEXT)
MEMO_TOOL_SPECS = tuple(args.spec() for args in _MEMOS)
SCRATCHPAD_TOOL_SPECS = tuple(args.spec() for args in _SCRATCHPAD)
# Every tool's name to its arguments' model.
ARGUMENTS: dict[str, type[ToolArgs]] = {
    args.tool: args for args in _MEMORY + _CONTEXT + _MEMOS + _SCRATCHPAD
}
