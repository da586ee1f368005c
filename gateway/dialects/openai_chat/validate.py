"""What OpenAI Chat Completions refuses, as a table (applied by ``gateway.dialects.validation``).

From the API reference of ``POST /v1/chat/completions``: ``model`` and ``messages`` (at least one)
are required; every message has a ``role``, and ``content`` is required except on an assistant
message that carries ``tool_calls`` (or the legacy ``function_call``) or a ``refusal``;
``temperature`` in [0, 2], ``top_p`` in [0, 1], ``presence_penalty`` / ``frequency_penalty`` in
[-2, 2], ``max_tokens`` / ``max_completion_tokens`` ≥ 1, ``top_logprobs`` in [0, 20]; a
``tool_choice`` other than ``none``/``auto`` needs ``tools``, and a named function must be one of
them; a function name is not empty. The wording is OpenAI's (``Invalid 'temperature': decimal above
maximum value. Expected a value <= 2, but got 2.5 instead.``).
"""

from __future__ import annotations

from typing import Any

from gateway.dialects.base import RequestMeta
from gateway.dialects.validation import Table, in_range, min_items, non_empty, required


def _content_required(message: dict[str, Any]) -> bool:
    if message.get("role") != "assistant":
        return True
    return not (message.get("tool_calls") or message.get("function_call") or message.get("refusal"))


RULES = (
    required("model"),
    required("messages"),
    min_items("messages"),
    required("messages[].role"),
    required("messages[].content", when=_content_required),
    in_range("temperature", 0, 2),
    in_range("top_p", 0, 1),
    in_range("presence_penalty", -2, 2),
    in_range("frequency_penalty", -2, 2),
    in_range("max_tokens", 1),
    in_range("max_completion_tokens", 1),
    in_range("top_logprobs", 0, 20),
    non_empty("tools[].function.name"),
)

WORDING = {
    "required": "Missing required parameter: '{path}'.",
    "range_min": "Invalid '{path}': {num} below minimum value. Expected a value >= {lo}, but got {value} instead.",
    "range_max": "Invalid '{path}': {num} above maximum value. Expected a value <= {hi}, but got {value} instead.",
    "min_items": "Invalid '{path}': empty array. Expected an array with minimum length {n}, but got an empty array instead.",
    "non_empty": "Invalid '{path}': empty string. Expected a string with minimum length 1, but got an empty string instead.",
    "one_of": "Invalid value: '{value}'. Supported values are: {values}.",
    "any_key": "Invalid '{path}': one of {keys} is required.",
}


def _function_names(tools: Any) -> set[str]:
    names = set()
    for tool in tools if isinstance(tools, list) else ():
        fn = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            names.add(fn["name"])
    return names


def tool_choice_offered(body: dict[str, Any], meta: RequestMeta) -> tuple[str, str] | None:
    choice = body.get("tool_choice")
    if choice is None or choice in ("none", "auto"):
        return None
    tools = body.get("tools")
    if not tools:
        return (
            "tool_choice",
            "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.",
        )
    if isinstance(choice, dict) and choice.get("type") == "function":
        fn = choice.get("function")
        name = fn.get("name") if isinstance(fn, dict) else None
        if isinstance(name, str) and name not in _function_names(tools):
            return (
                "tool_choice.function.name",
                f"Invalid 'tool_choice.function.name': function {name!r} is not among the 'tools' of this request.",
            )
    return None


TABLE = Table(RULES, WORDING, checks=(tool_choice_offered,))
