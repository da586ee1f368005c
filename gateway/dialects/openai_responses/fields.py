"""The Responses wire and the IR's fields: what a caller calls them, what an upstream cannot carry.

``PARAMS`` names an IR field the way a Responses caller wrote it (for a refusal in its own terms);
``LIMITS`` are the settings ``request_build`` has no place for (see ``gateway/dialects/carry.py``).
"""

from __future__ import annotations

from gateway.dialects.carry import USES, Limit

PARAMS = {
    "temperature": "temperature",
    "top_p": "top_p",
    "parallel_tool_calls": "parallel_tool_calls",
    "tools.strict": "tools[].strict",
    "tool_choice.allowed": "tool_choice.tools",
    "thinking": "reasoning",
    "thinking.disabled": "reasoning.effort",
    "response_format": "text.format",
    "response_format.json": "text.format",
    "user": "user",
    "metadata": "metadata",
    "messages.file_url": "input[].content[].file_url",
}

LIMITS = (
    Limit("stop", "the Responses API has no stop sequences"),
    # a sampling hint Gemini CLI always sends: dropped and reported unless refuse_unsupported
    Limit("top_k", "the Responses API has no top_k", advisory=True),
    Limit("messages.assistant_media", "Responses assistant messages cannot hold images or files"),
    Limit(
        "thinking.disabled",
        "not every Responses model takes reasoning.effort none: the model's default holds",
        advisory=True,
    ),
    Limit(
        "metadata",
        "Responses metadata values must be strings",
        advisory=True,
        when=lambda r: USES["metadata"](r) and not all(isinstance(v, str) for v in (r.metadata or {}).values()),
    ),
)

# Sampling hints a Responses caller may send that the IR has no slot for (see carry.lost_hints),
# and the hosted tools (web_search, file_search, mcp, computer_use_preview …) only OpenAI runs:
# an upstream of another dialect is sent neither, and the loss is reported.
HINTS = {
    "top_logprobs": ("top_logprobs",),
    "tools.hosted": ("tools_hosted",),
    "tool_choice.hosted": ("tool_choice_hosted",),
}
