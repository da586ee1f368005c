"""The Anthropic Messages wire and the IR's fields: what a caller calls them, what an upstream cannot carry.

``PARAMS`` names an IR field the way an Anthropic caller wrote it (for a refusal in its own
terms); ``LIMITS`` are the settings ``request_build`` has no place for (see ``gateway/dialects/carry.py``).
"""

from __future__ import annotations

from gateway.dialects.carry import USES, Limit

PARAMS = {
    "stop": "stop_sequences",
    "top_k": "top_k",
    "temperature": "temperature",
    "top_p": "top_p",
    "parallel_tool_calls": "tool_choice.disable_parallel_tool_use",
    "tools.strict": "tools[].strict",
    "thinking": "thinking",
    "thinking.disabled": "thinking",
    "response_format": "output_config.format",
    "user": "metadata.user_id",
    "metadata": "metadata",
    "messages.file_url": "messages[].content[].source.url",
    "messages.assistant_media": "messages[].content[]",
}

LIMITS = (
    Limit(
        "tool_choice.allowed",
        "Anthropic's tool_choice names one tool or none, not a list of allowed tools",
        # a required call among exactly one allowed tool is {type: tool, name}: carried
        when=lambda r: (
            USES["tool_choice.allowed"](r)
            and not (
                r.tool_choice is not None and r.tool_choice.mode == "required" and len(r.tool_choice.allowed or ()) == 1
            )
        ),
    ),
    Limit("response_format.json", "Anthropic takes a JSON schema (output_config.format), not a schema-less JSON mode"),
    Limit("messages.assistant_media", "Anthropic assistant turns cannot hold images or documents"),
    Limit(
        "metadata",
        "Anthropic metadata holds only user_id",
        advisory=True,
        when=lambda r: USES["metadata"](r) and r.dialect != "anthropic",
    ),
    Limit("store", "a Chat caller's store (OpenAI stored completions) has no Anthropic equivalent", advisory=True),
)

HINTS: dict[str, tuple[str, ...]] = {}  # every Anthropic sampling setting has an IR slot
