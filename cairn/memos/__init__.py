"""Inter-agent memos: send, broadcast, inbox, read and acknowledged state, expiry."""

from cairn.memos.box import ALL_AGENTS, Memo, MemoBox

__all__ = ["ALL_AGENTS", "Memo", "MemoBox"]
