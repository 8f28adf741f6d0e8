"""Slack for Cairn: a Bolt app on Socket Mode or the HTTP Events API (:class:`SlackFrontend`)."""

from cairn.bot.slack.frontend import SlackFrontend

__all__ = ["SlackFrontend"]
