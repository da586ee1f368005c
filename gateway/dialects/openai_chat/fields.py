"""The Chat Completions wire and the IR's fields: what a caller calls them, what an upstream cannot carry.

``PARAMS`` names an IR field the way a Chat caller wrote it (for a refusal in its own terms);
``LIMITS`` are the settings ``request_build`` has no place for (see ``gateway/dialects/carry.py``).
"""

from __future__ import annotations

from gateway.dialects.carry import USES, Limit

PARAMS = {
    "stop": "stop",
    "temperature": "temperature",
    "top_p": "top_p",
    "parallel_tool_calls": "parallel_tool_calls",
    "tools.strict": "tools[].function.strict",
    "tool_choice.allowed": "tool_choice.allowed_tools",
    "thinking": "reasoning_effort",
    "thinking.disabled": "reasoning_effort",
    "response_format": "response_format",
    "response_format.json": "response_format",
    "user": "user",
    "metadata": "metadata",
    "store": "store",
    "messages.file_url": "messages[].content[].file",
}

LIMITS = (
    # a sampling hint Gemini CLI always sends: dropped and reported unless refuse_unsupported
    Limit("top_k", "Chat Completions has no top_k", advisory=True),
    Limit("messages.file_url", "Chat Completions takes files as data or a file id, not by URL"),
    Limit("messages.assistant_media", "Chat Completions assistant messages cannot hold images or files"),
    # Not every Chat model takes reasoning_effort (gpt-4o refuses it): "off" is the default there.
    Limit("thinking.disabled", "Chat Completions has no portable way to switch reasoning off", advisory=True),
    Limit(
        "metadata",
        "Chat Completions takes metadata only with store: true",
        advisory=True,
        when=lambda r: USES["metadata"](r) and not r.store,
    ),
)

# Sampling hints a Chat caller may send that the IR has no slot for (kept in extras for a Chat
# upstream; toward another dialect dropped and reported: gateway/dialects/carry.py ``lost_hints``).
HINTS = {
    "presence_penalty": ("presence_penalty",),
    "frequency_penalty": ("frequency_penalty",),
    "seed": ("seed",),
    "logprobs": ("logprobs",),
    "top_logprobs": ("top_logprobs",),
}
