"""Responses client tools other than functions, declared to an upstream that knows only functions.

A Responses caller (Codex CLI) declares tools the API runs nowhere but on the caller's side:
``custom`` (a freeform-input tool — Codex's ``apply_patch`` — optionally with a ``format``
grammar), ``shell``, ``local_shell`` and ``apply_patch``. A Responses upstream gets them verbatim
(``request_build``); any other upstream gets each as a function tool the model can call, and the
call it makes goes back to the caller as the item the tool's type answers with:

============ ==================== ==================== =============================
tool type    function (arguments) caller's item        item field from the arguments
============ ==================== ==================== =============================
custom       its name (``input``) ``custom_tool_call`` ``input`` (the string)
shell        ``shell``            ``shell_call``       ``action`` (``commands`` …)
local_shell  ``local_shell``      ``local_shell_call`` ``action`` (``command``, ``env`` …)
apply_patch  ``apply_patch``      ``apply_patch_call`` ``operation`` (type, path, diff)
============ ==================== ==================== =============================

These are the inverse of items.py's mapping of the same items to function calls, so a
``custom_tool_call`` + ``custom_tool_call_output`` the caller sends back on the next turn reaches
the upstream as the function call it made and its result. The parser keeps the caller's own tool
objects in ``extras["openai-responses"]["tools_native"]`` (function name -> tool), which is how
the encoders know which function calls to write as such items.
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.dialects.common import new_id
from gateway.ir import Tool

NATIVE_KEY = "tools_native"

_CUSTOM_INPUT = "The tool's whole input, as one string (not JSON)."

_SHELL_ACTION: dict[str, Any] = {
    "type": "object",
    "properties": {
        "commands": {"type": "array", "items": {"type": "string"}, "description": "Shell commands, run in order."},
        "timeout_ms": {"type": "integer", "description": "A time limit for the commands, in milliseconds."},
        "max_output_length": {"type": "integer", "description": "The most output characters to return."},
    },
    "required": ["commands"],
}
_LOCAL_SHELL_ACTION: dict[str, Any] = {
    "type": "object",
    "properties": {
        "type": {"type": "string", "enum": ["exec"]},
        "command": {"type": "array", "items": {"type": "string"}, "description": "The command and its arguments."},
        "env": {"type": "object", "additionalProperties": {"type": "string"}},
        "timeout_ms": {"type": "integer"},
        "working_directory": {"type": "string"},
        "user": {"type": "string"},
    },
    "required": ["command"],
}
_PATCH_OPERATION: dict[str, Any] = {
    "type": "object",
    "properties": {
        "type": {"type": "string", "enum": ["create_file", "update_file", "delete_file"]},
        "path": {"type": "string", "description": "The file's path."},
        "diff": {"type": "string", "description": "A V4A diff: the file's content or the changes to it."},
    },
    "required": ["type", "path"],
}
# tool type -> (function name, description, parameters, item type, item field, item id prefix)
_BUILT_IN: dict[str, tuple[str, str, dict[str, Any], str, str, str]] = {
    "shell": ("shell", "Run shell commands on the user's machine.", _SHELL_ACTION, "shell_call", "action", "sh_"),
    "local_shell": (
        "local_shell",
        "Run a command on the user's machine.",
        _LOCAL_SHELL_ACTION,
        "local_shell_call",
        "action",
        "lsh_",
    ),
    "apply_patch": (
        "apply_patch",
        "Create, update or delete a file on the user's machine.",
        _PATCH_OPERATION,
        "apply_patch_call",
        "operation",
        "apc_",
    ),
}
TYPES = frozenset({"custom", *_BUILT_IN})


def declare(tool: dict[str, Any]) -> Tool:
    """The function tool a non-Responses upstream is given for the caller's ``tool`` (one of
    ``TYPES``)."""
    kind = tool.get("type")
    if kind == "custom":
        name = tool.get("name")
        return Tool(
            name if isinstance(name, str) else "",
            _custom_description(tool),
            {
                "type": "object",
                "properties": {"input": {"type": "string", "description": _input_description(tool)}},
                "required": ["input"],
            },
        )
    name, description, parameters, _, _, _ = _BUILT_IN[str(kind)]
    return Tool(name, description, parameters)


def _custom_description(tool: dict[str, Any]) -> str | None:
    description = tool.get("description")
    return description if isinstance(description, str) and description else None


def _input_description(tool: dict[str, Any]) -> str:
    """What the model is told the string must be: the tool's ``format`` (a Lark or regex grammar)
    written out, since a function's parameters cannot constrain a string by a grammar."""
    fmt = tool.get("format")
    if not isinstance(fmt, dict) or fmt.get("type") != "grammar":
        return _CUSTOM_INPUT
    syntax = fmt.get("syntax") if isinstance(fmt.get("syntax"), str) else "lark"
    definition = fmt.get("definition") if isinstance(fmt.get("definition"), str) else ""
    return f"{_CUSTOM_INPUT} It must match this {syntax} grammar exactly:\n{definition}"


def native_item(
    tool: dict[str, Any], call_id: str, arguments: str, status: str = "completed", namespace: str | None = None
) -> dict[str, Any]:
    """The caller's own item for the model's call of ``tool``'s function (``arguments``: its JSON
    text, possibly empty while a stream has only begun); ``namespace``: the namespace tool the
    caller declared it in (the item names it, as OpenAI's does)."""
    args = _object(arguments)
    if tool.get("type") == "custom":
        text = args.get("input") if isinstance(args.get("input"), str) else (arguments if args == {} else "")
        item = {
            "type": "custom_tool_call",
            "id": new_id("ctc_"),
            "call_id": call_id,
            "name": str(tool.get("name") or ""),
            "input": text if arguments.strip() else "",
        }
        if namespace:
            item["namespace"] = namespace
        return item
    _, _, _, item_type, field, prefix = _BUILT_IN[str(tool.get("type"))]
    value = _action(str(tool.get("type")), args)
    return {"type": item_type, "id": new_id(prefix), "call_id": call_id, field: value, "status": status}


def _action(kind: str, args: dict[str, Any]) -> dict[str, Any]:
    """The arguments as the item's ``action`` / ``operation``, with the fields the API's types
    require present (a model may leave out what its schema marks optional)."""
    if kind == "shell":
        commands = args.get("commands")
        return {**args, "commands": [str(c) for c in commands] if isinstance(commands, list) else []}
    if kind == "local_shell":
        command = args.get("command")
        env = args.get("env")
        return {
            **args,
            "type": "exec",
            "command": [str(c) for c in command] if isinstance(command, list) else [],
            "env": env if isinstance(env, dict) else {},
        }
    op = dict(args)
    if op.get("type") not in ("create_file", "update_file", "delete_file"):
        op["type"] = "update_file"
    op["path"] = str(op.get("path") or "")
    if op["type"] != "delete_file":
        op["diff"] = str(op.get("diff") or "")
    return op


def _object(arguments: str) -> dict[str, Any]:
    try:
        value = orjson.loads(arguments) if arguments.strip() else {}
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


class InputStream:
    """The ``input`` string of a custom tool's function call, decoded while its JSON arguments
    stream (``{"input": "*** Begin Patch\\n…``), so the caller sees the freeform input grow as
    ``response.custom_tool_call_input.delta`` events. Each fragment is decoded once (a patch of
    any size costs linear time); an escape cut by a fragment waits for the next. Arguments of
    another shape give nothing until the end (``feed`` returns ``""``); the whole input is then the
    done event's."""

    __slots__ = ("_sent", "_raw", "_state")

    def __init__(self) -> None:
        self._sent: list[str] = []  # the input decoded and sent so far
        self._raw = ""  # the arguments not yet decoded (before the string: all of them)
        self._state = "head"  # head (before the string) | body | closed | off (not {"input": "..."})

    def feed(self, fragment: str) -> str:
        """The input text that ``fragment`` completes, not yet sent."""
        if self._state in ("closed", "off"):
            return ""
        self._raw += fragment
        if self._state == "head":
            compact = "".join(self._raw.split())
            if not (_LEAD.startswith(compact) or compact.startswith(_LEAD)):
                self._state = "off"
                return ""
            if len(compact) < len(_LEAD):
                return ""
            self._state = "body"
            self._raw = self._raw[self._raw.index('"', self._raw.index(":")) + 1 :]
        end, closed = _safe_end(self._raw)
        if end == 0:
            return ""
        try:
            new = orjson.loads(b'"' + self._raw[:end].encode() + b'"')
        except (orjson.JSONDecodeError, UnicodeEncodeError):
            self._state = "off"
            return ""
        self._raw = "" if closed else self._raw[end:]
        if closed:
            self._state = "closed"
        new = new if isinstance(new, str) else ""
        self._sent.append(new)
        return new

    @property
    def sent(self) -> str:
        """The input sent so far."""
        return "".join(self._sent)


_LEAD = '{"input":"'


def _safe_end(text: str) -> tuple[int, bool]:
    """Where the string content ``text`` begins with can be decoded up to — not into an escape a
    fragment cut, nor between a surrogate pair's two escapes — and whether its closing quote is
    there."""
    i, n = 0, len(text)
    end = 0
    while i < n:
        ch = text[i]
        if ch == '"':
            return i, True
        if ch != "\\":
            i += 1
            end = i
            continue
        if i + 1 >= n:
            break
        if text[i + 1] != "u":
            i += 2
            end = i
            continue
        if i + 6 > n:
            break
        code = text[i + 2 : i + 6]
        if code[0] in "dD" and code[1] in "89abAB":
            if i + 12 > n:  # a high surrogate: decoded with its pair
                break
            i += 12
        else:
            i += 6
        end = i
    return end, False
