"""The Matrix frontend (matrix-nio): rooms, threads, mentions, reactions and their redaction."""

from cairn.bot.matrix.frontend import MatrixFrontend
from cairn.bot.matrix.rooms import ENCRYPTION_OFF_NOTICE

__all__ = ["ENCRYPTION_OFF_NOTICE", "MatrixFrontend"]
