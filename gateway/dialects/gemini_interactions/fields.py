"""The Interactions wire and the IR's fields: what a caller calls them, what an upstream cannot carry.

``PARAMS`` names an IR field the way an Interactions caller wrote it (for a refusal in its own
terms); ``LIMITS`` are the settings ``request_build`` has no place for (see ``gateway/dialects/carry.py``).
"""

from __future__ import annotations

from gateway.dialects.carry import Limit

PARAMS = {
    "stop": "generation_config.stop_sequences",
    "temperature": "generation_config.temperature",
    "top_p": "generation_config.top_p",
    "tool_choice.allowed": "generation_config.tool_choice.allowed_tools",
    "thinking": "generation_config.thinking_level",
    "thinking.disabled": "generation_config.thinking_level",
    "response_format": "response_format",
    "response_format.json": "response_format",
    "messages.file_url": "input[].content[].uri",
    "messages.assistant_media": "input[].content[]",
}

LIMITS = (
    # hints clients send by default (Gemini CLI: topK; pydantic-ai: strict on every tool): the
    # schema still goes; dropped and reported unless refuse_unsupported
    Limit("top_k", "the Interactions API has no top_k", advisory=True),
    Limit("parallel_tool_calls", "the Interactions API cannot be told to make one function call at a time"),
    Limit("tools.strict", "Interactions function tools have no strict mode", advisory=True),
    Limit("user", "the Interactions API takes no end-user id", advisory=True),
    Limit("metadata", "the Interactions API takes no request metadata", advisory=True),
    Limit("store", "a Chat caller's store (OpenAI stored completions) has no Interactions equivalent", advisory=True),
)

# Sampling hints an Interactions caller may send that the IR has no slot for (see carry.lost_hints).
HINTS = {"seed": ("generation_config", "seed")}
