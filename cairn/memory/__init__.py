"""Memory: the scoped long-term store and the per-session context engine."""

from cairn.memory.recall import Recalled
from cairn.memory.records import Memory
from cairn.memory.scope import Scope, Source, Visibility, isolated, private_to, said_in
from cairn.memory.store import MemoryStore, Remembered

__all__ = [
    "Memory",
    "MemoryStore",
    "Recalled",
    "Remembered",
    "Scope",
    "Source",
    "Visibility",
    "isolated",
    "private_to",
    "said_in",
]
