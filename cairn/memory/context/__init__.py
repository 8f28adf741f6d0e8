"""The context engine: the working memory of one session (thread), compiled per turn.

- :mod:`.state`: the session's state graph and checkpoint, folded deterministically from events;
- :mod:`.distill` and :mod:`.pastes`: long pastes and tool output reduced to cards;
- :mod:`.artifacts`: the content-addressed store behind the cards;
- :mod:`.compiler`: the budget-band compiler with pressure levels and a safety net;
- :mod:`.classic`: the verbatim transcript, kept as the baseline;
- :mod:`.engine`: resuming a session, compiling its turns, recording telemetry.
"""

from cairn.memory.context.artifacts import ArtifactStore
from cairn.memory.context.classic import ClassicCompiler
from cairn.memory.context.compiler import CompiledPrompt, compile_prompt, speaker_line
from cairn.memory.context.engine import ContextEngine, TurnContext, agent_instructions
from cairn.memory.context.state import SessionState

__all__ = [
    "ArtifactStore",
    "ClassicCompiler",
    "CompiledPrompt",
    "ContextEngine",
    "SessionState",
    "TurnContext",
    "agent_instructions",
    "compile_prompt",
    "speaker_line",
]
