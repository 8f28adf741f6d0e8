"""The Matrix frontend (matrix-nio): rooms, threads, mentions, reactions and their redaction."""

from cairn.bot.matrix.frontend import ENCRYPTION_OFF_NOTICE, MatrixFrontend

__all__ = ["ENCRYPTION_OFF_NOTICE", "MatrixFrontend"]
