"""What the OpenAI Responses API refuses, as a table (applied by ``gateway.dialects.validation``).

From the API reference of ``POST /v1/responses``: an ``input`` array is not empty and each message
item has a ``role`` and a ``content``; ``temperature`` in [0, 2], ``top_p`` in [0, 1],
``max_output_tokens`` ≥ 1 (the gateway's floor; the API's own is 16, kept lenient for small test
limits), ``top_logprobs`` in [0, 20]; a function tool has a non-empty ``name``; a ``tool_choice``
of ``required`` or naming a function needs tools, and the named function must be offered (a
Codex ``namespace`` tool offers the functions inside it). Wording as OpenAI's.
"""

from __future__ import annotations

from typing import Any

from gateway.dialects.base import RequestMeta
from gateway.dialects.openai_chat.validate import WORDING
from gateway.dialects.validation import Table, in_range, min_items, non_empty, required


def _is_message(item: dict[str, Any]) -> bool:
    return item.get("type") in (None, "message")


RULES = (
    required("model"),
    min_items("input"),
    required("input[].role", when=_is_message),
    required("input[].content", when=_is_message),
    in_range("temperature", 0, 2),
    in_range("top_p", 0, 1),
    in_range("max_output_tokens", 1),
    in_range("top_logprobs", 0, 20),
    non_empty("tools[].name"),
)


def _function_names(tools: Any) -> set[str]:
    names: set[str] = set()
    for tool in tools if isinstance(tools, list) else ():
        if not isinstance(tool, dict):
            continue
        if tool.get("type") == "function" and isinstance(tool.get("name"), str):
            names.add(tool["name"])
        inner = tool.get("tools")
        if tool.get("type") == "namespace" and isinstance(inner, list):
            names |= {t["name"] for t in inner if isinstance(t, dict) and isinstance(t.get("name"), str)}
    return names


def tool_choice_offered(body: dict[str, Any], meta: RequestMeta) -> tuple[str, str] | None:
    choice = body.get("tool_choice")
    tools = body.get("tools")
    if choice == "required" or (isinstance(choice, dict) and choice.get("type") == "function"):
        if not tools:
            return (
                "tool_choice",
                "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.",
            )
    if isinstance(choice, dict) and choice.get("type") == "function":
        name = choice.get("name")
        if isinstance(name, str) and not choice.get("namespace") and name not in _function_names(tools):
            return (
                "tool_choice.name",
                f"Invalid 'tool_choice.name': function {name!r} is not among the 'tools' of this request.",
            )
    return None


TABLE = Table(RULES, WORDING, checks=(tool_choice_offered,))
