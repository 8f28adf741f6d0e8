"""The Slack export writer the tests use: :mod:`cairn.bench.slack_export`, shared with
``cairn bench slack-import`` (one writer of realistic exports)."""

from cairn.bench.slack_export import *  # noqa: F403
from cairn.bench.slack_export import __all__ as __all__
