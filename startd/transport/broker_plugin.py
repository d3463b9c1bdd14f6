"""The embedded broker's plugin that enforces the identity rule of command topics (:func:`publish_allowed`);
loaded by the broker's own process (:mod:`startd.transport.broker_process`), so the daemon never imports
amqtt. It imports nothing of startd's: the broker process stays small."""

from __future__ import annotations

from dataclasses import dataclass

from amqtt.contexts import Action, BaseContext
from amqtt.plugins.base import BaseTopicPlugin
from amqtt.session import Session


def publish_allowed(topic: str, username: str | None) -> bool:
    """The identity rule for ``{root}/startd/{M}/command[/U]`` topics (other topics are always allowed)."""
    parts = topic.split("/")
    # the root may itself contain slashes: look for .../startd/M/command[/U] at the end
    if len(parts) >= 4 and parts[-3] == "startd" and parts[-1] == "command":
        return True  # the bare topic carries no claim of identity: its commands count as anonymous
    if len(parts) >= 5 and parts[-4] == "startd" and parts[-2] == "command":
        return bool(username) and parts[-1] == username
    return True


class CommandIdentityPlugin(BaseTopicPlugin):
    """Refuses a publication on a startd command topic whose user segment is not the publisher's user."""

    def __init__(self, context: BaseContext) -> None:
        super().__init__(context)

    @dataclass
    class Config:
        """No options: the rule is fixed."""

    async def topic_filtering(self, *, session: Session | None = None, topic: str | None = None,
                              action: Action | None = None) -> bool | None:
        if action != Action.PUBLISH or not topic:
            return True
        return publish_allowed(topic, session.username if session is not None else None)
