"""What the Anthropic Messages API refuses, as a table (applied by ``gateway.dialects.validation``).

From the API reference of ``POST /v1/messages``: ``model``, ``max_tokens`` (≥ 1) and ``messages``
(at least one) are required; each message needs a ``role`` and a ``content``, each content block a
``type`` the API has (``BLOCK_TYPES``: a new Anthropic block type is added there); ``temperature`` and
``top_p`` are in [0, 1] (narrower than OpenAI's [0, 2]), ``top_k`` ≥ 0; an enabled thinking
budget is ≥ 1024 and below ``max_tokens``; ``tool_choice`` needs tools, and ``{"type": "tool"}``
must name one of them. The wording follows Anthropic's own (``max_tokens: Field required``).

Kept on purpose, though the API refuses it: ``role: "system"`` inside ``messages``. Claude Code sends
such turns for model names it does not know and the gateway folds them into the system prompt
(docs/agents.md), so they are never a 400 here.
"""

from __future__ import annotations

from typing import Any

from gateway.dialects.base import RequestMeta
from gateway.dialects.validation import Table, in_range, min_items, non_empty, one_of, required

# Content block types of the Messages API (request side), server-tool results included: a block
# type from another dialect (``image_url``, ``input_text``) would otherwise be dropped in silence.
BLOCK_TYPES = (
    "text",
    "image",
    "document",
    "search_result",
    "tool_use",
    "tool_result",
    "thinking",
    "redacted_thinking",
    "server_tool_use",
    "web_search_tool_result",
    "web_fetch_tool_result",
    "code_execution_tool_result",
    "bash_code_execution_tool_result",
    "text_editor_code_execution_tool_result",
    "tool_search_tool_result",
    "mcp_tool_use",
    "mcp_tool_result",
    "container_upload",
)

RULES = (
    required("model"),
    required("max_tokens"),
    required("messages"),
    min_items("messages"),
    required("messages[].role"),
    one_of("messages[].role", "user", "assistant", "system", message="{path}: Input should be 'user' or 'assistant'"),
    required("messages[].content"),
    required("messages[].content[].type"),
    one_of("messages[].content[].type", *BLOCK_TYPES),
    in_range("max_tokens", 1),
    in_range("temperature", 0, 1),
    in_range("top_p", 0, 1),
    in_range("top_k", 0),
    in_range("thinking.budget_tokens", 1024),
    non_empty("tools[].name"),
    non_empty("system[].text"),
)

WORDING = {
    "required": "{path}: Field required",
    "range_min": "{path}: Input should be greater than or equal to {lo}",
    "range_max": "{path}: Input should be less than or equal to {hi}",
    "min_items": "{path}: List should have at least {n} item after validation, not 0",
    "non_empty": "{path}: String should have at least 1 character",
    "one_of": "{path}: Input tag {value!r} found using 'type' does not match any of the expected tags: {values}",
    "any_key": "{path}: one of {keys} is required",
}


def _tool_names(body: dict[str, Any]) -> set[str] | None:
    tools = body.get("tools")
    if not isinstance(tools, list) or not tools:
        return None
    return {t["name"] for t in tools if isinstance(t, dict) and isinstance(t.get("name"), str)}


def tool_choice_offered(body: dict[str, Any], meta: RequestMeta) -> tuple[str, str] | None:
    choice = body.get("tool_choice")
    if not isinstance(choice, dict) or choice.get("type") in (None, "none"):
        return None
    names = _tool_names(body)
    if names is None and choice.get("type") != "auto":
        return "tool_choice", "tool_choice: tool_choice may only be specified while providing tools"
    name = choice.get("name")
    if choice.get("type") == "tool" and isinstance(name, str) and names is not None and name not in names:
        return "tool_choice.name", f"tool_choice.name: tool {name!r} is not among the tools offered in this request"
    return None


def budget_below_max_tokens(body: dict[str, Any], meta: RequestMeta) -> tuple[str, str] | None:
    thinking, limit = body.get("thinking"), body.get("max_tokens")
    if not isinstance(thinking, dict) or thinking.get("type") != "enabled":
        return None
    budget = thinking.get("budget_tokens")
    if isinstance(budget, int) and isinstance(limit, int) and not isinstance(budget, bool) and budget >= limit:
        return (
            "thinking.budget_tokens",
            f"`max_tokens` must be greater than `thinking.budget_tokens` ({limit} <= {budget})",
        )
    return None


TABLE = Table(RULES, WORDING, checks=(tool_choice_offered, budget_below_max_tokens))
