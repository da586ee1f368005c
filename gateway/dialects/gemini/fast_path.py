"""Where a Gemini stream names its model (the same-dialect fast path).

Every chunk names it at its top level as ``modelVersion``. Gemini has no terminator (the body just
ends after a ``finishReason``), so no frame is held back for its stop reason.
"""

from __future__ import annotations

from gateway.dialects.base import FastPathRules, ModelPlace

RULES = FastPathRules(ModelPlace("modelVersion"))
