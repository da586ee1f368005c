"""The request IR: one dialect-neutral chat request that every parser produces and every builder reads.

Parsing happens once per request, so plain dataclasses with defaults are fine here; the per-chunk
hot path never touches these types.

Conventions:

* ``ChatRequest.system`` is the leading system prompt (a list of text pieces, joined with blank
  lines by dialects that take one string). A ``Message`` with role ``"system"`` inside
  ``messages`` is a system turn at that position (Claude Code sends those); builders fold it into
  whatever their dialect allows.
* Tool call arguments are kept as JSON text (``ToolCallPart.arguments``), exactly as streamed.
* ``ThinkingPart.signature`` is the raw provider signature and ``origin`` names the dialect that
  made it (see ``gateway.dialects.signatures``); a builder sends it only to a provider of that dialect.
* ``extras`` holds request fields the IR has no slot for, keyed by the dialect that understands
  them. A builder of the same dialect passes them through; others drop them (with a log warning
  made by the parser).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Role = Literal["system", "user", "assistant"]
ToolMode = Literal["auto", "none", "required", "tool"]
# A parser's checked string as the literal type (a lookup after validation, not a cast)
ROLES: dict[str, Role] = {"system": "system", "user": "user", "assistant": "assistant"}
TOOL_MODES: dict[str, ToolMode] = {"auto": "auto", "none": "none", "required": "required", "tool": "tool"}


@dataclass(slots=True)
class TextPart:
    text: str
    cache_control: dict[str, Any] | None = None  # Anthropic prompt caching; others drop it


@dataclass(slots=True)
class ImagePart:
    """An image as base64 ``data`` with ``media_type``, or as a ``url`` (http(s) or data: URL)."""

    media_type: str | None = None
    data: str | None = None
    url: str | None = None


@dataclass(slots=True)
class FilePart:
    """A non-image file (PDF, audio …) as base64 ``data`` or a ``url``/file URI."""

    media_type: str | None = None
    data: str | None = None
    url: str | None = None
    filename: str | None = None


@dataclass(slots=True)
class ToolCallPart:
    id: str
    name: str
    arguments: str = "{}"  # JSON text of an object
    # A call of a kind other than a function (a Responses ``custom_tool_call``, ``shell_call`` …):
    # the caller's item as sent, and its dialect; a builder of ``origin``'s dialect sends ``item``
    # verbatim, others the function call ``name`` / ``arguments`` say (gateway/dialects/items.py).
    item: dict[str, Any] | None = None
    origin: str | None = None


@dataclass(slots=True)
class ToolResultPart:
    tool_call_id: str
    content: list[TextPart | ImagePart | FilePart] = field(default_factory=list)
    is_error: bool = False
    name: str | None = None  # the called tool's name, when the dialect says (Gemini needs it)
    item: dict[str, Any] | None = None  # the caller's own result item (``ToolCallPart.item``)
    origin: str | None = None


@dataclass(slots=True)
class OpaquePart:
    """An item of the caller's dialect the IR has no part for (a server tool's call or result sent
    back in the history: a Responses ``web_search_call``, an Anthropic ``server_tool_use`` …).
    A builder of ``origin``'s dialect sends ``item`` verbatim, in its place; others leave it out."""

    item: dict[str, Any]
    origin: str


@dataclass(slots=True)
class ThinkingPart:
    text: str = ""
    signature: str | None = None
    origin: str | None = None  # dialect that produced ``signature``
    redacted_data: str | None = None  # Anthropic redacted_thinking payload (opaque)


Part = TextPart | ImagePart | FilePart | ToolCallPart | ToolResultPart | ThinkingPart | OpaquePart


@dataclass(slots=True)
class Message:
    role: Role
    content: list[Part] = field(default_factory=list)


@dataclass(slots=True)
class Tool:
    name: str
    description: str | None = None
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})
    strict: bool | None = None


@dataclass(slots=True)
class ToolChoice:
    mode: ToolMode = "auto"
    name: str | None = None  # for mode "tool"
    allowed: list[str] | None = None  # Gemini allowedFunctionNames with ANY / AUTO


@dataclass(slots=True)
class Thinking:
    """What the caller asked of reasoning. ``None`` fields: not said; the upstream default holds."""

    enabled: bool | None = None
    budget_tokens: int | None = None
    effort: str | None = None  # minimal | low | medium | high | xhigh
    include_thoughts: bool | None = None  # whether thought text/summaries should be returned


@dataclass(slots=True)
class ChatRequest:
    model: str
    messages: list[Message] = field(default_factory=list)
    system: list[TextPart] = field(default_factory=list)
    tools: list[Tool] = field(default_factory=list)
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    stop: list[str] = field(default_factory=list)
    stream: bool = False
    include_usage: bool = False  # OpenAI chat stream_options.include_usage
    stream_framing: str = "sse"  # or "json-array": Gemini streamGenerateContent without alt=sse
    user: str | None = None
    metadata: dict[str, Any] | None = None
    thinking: Thinking | None = None
    response_format: dict[str, Any] | None = None  # {"type": "json_schema", "schema": {...}} or {"type": "json"}
    store: bool | None = None
    # the caller's ``store`` is the gateway's own store (its dialect keeps stored objects: Responses,
    # Interactions), not a request for the upstream to keep the answer (a Chat caller's ``store``)
    store_here: bool = False
    previous_id: str | None = None  # previous_response_id / previous_interaction_id (stateful.py resolves it)
    background: bool = False  # run detached from the caller's connection (stateful dialects)
    extras: dict[str, dict[str, Any]] = field(default_factory=dict)
    dialect: str = ""  # the caller's dialect
    session: str | None = None  # the caller's session header (affinity.py: which conversation this is)
    prompt_cache_key: str | None = None  # OpenAI's prompt-cache routing hint (a session signal too)
    headers: dict[str, str] = field(default_factory=dict)  # provider headers worth forwarding (anthropic-beta …)
    key_name: str | None = (
        None  # the named caller key (None: the shared key); what it stores is that key's (stateful.py)
    )
