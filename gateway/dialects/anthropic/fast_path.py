"""Where an Anthropic stream names its model and states its stop reason (the same-dialect fast path).

The model is ``message_start.message.model``. The stop reason is in ``message_delta``; it is held
until ``message_stop`` because Claude Code takes a stop reason as the end of the answer, so a
stream cut after it must not show one. (The ``event:`` line is optional on the wire; the JSON
``type`` says the same.)
"""

from __future__ import annotations

from gateway.dialects.base import FastPathRules, ModelPlace


def carries_stop(event: str | None, data: str) -> bool:
    return event == "message_delta" or (event is None and '"message_delta"' in data)


RULES = FastPathRules(ModelPlace("model", parent="message"), carries_stop=carries_stop)
