"""What Responses output / input items are beyond messages, function calls and reasoning.

Client tool calls of other kinds (the caller runs them, as it runs a function): ``custom_tool_call``
(a freeform-input tool: Codex's ``apply_patch``), ``shell_call`` (the shell tool),
``local_shell_call``, ``apply_patch_call`` and ``computer_call``. Toward another dialect each is a
function call, so a caller of any dialect can run it:

==================== ================ ===========================================
item                 function name    arguments (a JSON object)
==================== ================ ===========================================
custom_tool_call     the tool's name  ``{"input": <the item's input string>}``
shell_call           ``shell``        the item's ``action`` (``commands`` …)
local_shell_call     ``local_shell``  the item's ``action`` (``command``, ``env`` …)
apply_patch_call     ``apply_patch``  the item's ``operation`` (``type``, ``path``, ``diff``)
computer_call        ``computer``     the item's ``action``
==================== ================ ===========================================

Their results (``custom_tool_call_output``, ``shell_call_output``, ``local_shell_call_output``,
``apply_patch_call_output``, ``computer_call_output``) are tool results: their ``output`` as text
(a string as is, anything else as its JSON). A Responses upstream gets the items themselves,
verbatim. Every other item (``web_search_call``, ``mcp_call``, ``mcp_list_tools``,
``tool_search_call``, ``image_generation_call`` …, unknown types included) is a server item: kept
whole for a Responses caller or upstream, left out and reported elsewhere
(gateway/dialects/items.py).
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.dialects.common import new_id

DIALECT = "openai-responses"

_CALL_NAMES = {
    "shell_call": "shell",
    "local_shell_call": "local_shell",
    "apply_patch_call": "apply_patch",
    "computer_call": "computer",
}
_CALL_ARGS = {
    "shell_call": "action",
    "local_shell_call": "action",
    "apply_patch_call": "operation",
    "computer_call": "action",
}
CLIENT_CALLS = frozenset({"custom_tool_call", *_CALL_NAMES})
CLIENT_RESULTS = frozenset(f"{kind}_output" for kind in CLIENT_CALLS)
# The items the decoders read themselves; any other is kept whole.
OWN_ITEMS = frozenset({"message", "function_call", "reasoning"})


def client_call(item: dict[str, Any]) -> tuple[str, str, str] | None:
    """A client tool call item as a function call: (call id, name, arguments JSON text);
    ``None`` for any other item."""
    kind = item.get("type")
    if kind not in CLIENT_CALLS:
        return None
    call_id = item.get("call_id") or item.get("id")
    call_id = call_id if isinstance(call_id, str) and call_id else new_id("call_")
    if kind == "custom_tool_call":
        name, text = item.get("name"), item.get("input")
        return call_id, name if isinstance(name, str) else "", _json({"input": text if isinstance(text, str) else ""})
    value = item.get(_CALL_ARGS[str(kind)])
    return call_id, _CALL_NAMES[str(kind)], _json(value if isinstance(value, dict) else {})


def client_result(item: dict[str, Any]) -> tuple[str, str] | None:
    """A client tool call's result item as a tool result: (call id, output text); ``None`` for
    any other item. ``local_shell_call_output`` names its call by ``id`` in the API's types."""
    if item.get("type") not in CLIENT_RESULTS:
        return None
    call_id = item.get("call_id") or item.get("id")
    output = item.get("output")
    text = output if isinstance(output, str) else "" if output is None else _json(output)
    return (call_id if isinstance(call_id, str) else ""), text


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()
