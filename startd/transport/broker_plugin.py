"""The embedded broker's plugin that enforces the identity rule of command topics
(:func:`startd.transport.broker.publish_allowed`); in a module of its own so that amqtt is imported only
when an embedded broker starts."""

from __future__ import annotations

from dataclasses import dataclass

from amqtt.contexts import Action, BaseContext
from amqtt.plugins.base import BaseTopicPlugin
from amqtt.session import Session

from .broker import publish_allowed


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
