"""Where an OpenAI chat stream names its model and states its stop reason (the same-dialect fast path).

Every chunk names the model at its top level (``model``; Azure's filter-annotation chunk sends it
empty). A chunk with a non-null ``finish_reason`` states the stop reason; it (and the usage chunk
after it) is held until ``data: [DONE]``, so a stream cut there does not look finished.
"""

from __future__ import annotations

import re

from gateway.dialects.base import FastPathRules, ModelPlace

_NULL_FINISH = re.compile(r'"finish_reason"\s*:\s*null')


def carries_stop(event: str | None, data: str) -> bool:
    return '"finish_reason"' in data and '"finish_reason":null' not in data and not _NULL_FINISH.search(data)


RULES = FastPathRules(ModelPlace("model"), carries_stop=carries_stop)
