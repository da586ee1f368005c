"""What the Gemini Interactions API refuses, as a table (applied by ``gateway.dialects.validation``).

The Interactions wire is snake_case: ``generation_config.temperature`` in [0, 2], ``top_p`` in
[0, 1], ``top_k`` ≥ 0, ``max_output_tokens`` ≥ 1; a function tool has a non-empty ``name``. Wording
as Gemini's, naming ``CreateInteractionRequest`` where Gemini names ``GenerateContentRequest``.
"""

from __future__ import annotations

from gateway.dialects.gemini.validate import WORDING
from gateway.dialects.validation import Table, in_range, non_empty

RULES = (
    in_range("generation_config.temperature", 0, 2),
    in_range("generation_config.top_p", 0, 1),
    in_range("generation_config.top_k", 0),
    in_range("generation_config.max_output_tokens", 1),
    non_empty("tools[].name"),
)

TABLE = Table(RULES, {k: v.replace("GenerateContentRequest", "CreateInteractionRequest") for k, v in WORDING.items()})
