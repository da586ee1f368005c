"""The same-dialect fast path rules, for the codec protocol only.

No caller endpoint speaks Converse, so passthrough.py never forwards Converse frames as they are.
Were it to: Converse frames do not name the model (``messageStart`` holds only the role), and the
stop reason is on ``messageStop``.
"""

from __future__ import annotations

from gateway.dialects.base import FastPathRules, ModelPlace


def carries_stop(event: str | None, data: str) -> bool:
    return event == "messageStop"


RULES = FastPathRules(ModelPlace("model"), carries_stop=carries_stop)
