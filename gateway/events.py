"""The internal event union: what every stream decoder emits and every stream encoder consumes.

Plain slotted dataclasses (no pydantic): one is built per upstream chunk, so they must be cheap.

Ordering contract every decoder keeps (encoders rely on it):

* ``MessageStart`` comes first, exactly once.
* Each block is ``BlockStart`` → deltas → ``BlockStop`` with one ``index`` that is the block's
  position in the final message content (Anthropic's meaning). Blocks of a stream may interleave
  (parallel tool calls streamed side by side), but a delta never precedes its ``BlockStart``.
* ``Usage`` may come any number of times; it is cumulative: the last one wins, never summed.
* The stream ends with exactly one ``End`` (only once the upstream's own terminator was seen) or
  one ``StreamError``. Nothing follows either.

Token meanings in ``Usage`` (one canonical reading; each codec converts at its edge):

* ``input``: every prompt token, cached ones included (OpenAI's ``prompt_tokens`` meaning).
  ``cache_read`` and ``cache_write`` are the parts of ``input`` read from / written to a cache.
* ``output``: every generated token, reasoning included (OpenAI's ``completion_tokens`` meaning).
  ``reasoning`` is the part of ``output`` spent thinking.
* ``tool_use``: the part of ``input`` that server-side tools fed the model (Google Search results:
  Interactions' ``total_tool_use_tokens``, Gemini's ``toolUsePromptTokenCount``). Input the model
  read, so counted (and billed) in ``input``, and kept apart so a caller that can show it does.
* ``None`` means "the upstream did not say": never silently zero.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

# ``opaque``: an output item the IR has no kind for (a server tool's call or result: Anthropic's
# ``server_tool_use`` / ``web_search_tool_result``, Responses' ``web_search_call`` / ``mcp_call``,
# an Interactions ``google_search_call`` step …), carried whole in ``BlockStart.item``.
BlockKind = Literal["text", "tool_call", "thinking", "redacted_thinking", "opaque"]

# Normalised stop reasons. ``End.raw_reason`` keeps the provider's own value.
StopReason = Literal["stop", "length", "tool_use", "content_filter", "refusal", "pause", "error"]


@dataclass(slots=True)
class MessageStart:
    id: str
    model: str


@dataclass(slots=True)
class BlockStart:
    index: int
    kind: BlockKind
    id: str | None = None  # tool call id
    name: str | None = None  # tool name
    data: str | None = None  # opaque payload of a redacted_thinking block (arrives whole)
    # The tool's namespace, apart from ``name`` (a Responses ``function_call`` of a namespaced or
    # tool-search tool): a caller of another dialect declared the bare name and gets it; only a
    # Responses encoder writes the namespace back.
    namespace: str | None = None
    # The upstream's own item (JSON object) and the dialect it is written in: an ``opaque`` block's
    # whole content, or a tool call of a kind other than a function (a Responses ``custom_tool_call``,
    # ``shell_call`` …: ``name`` / deltas then say it as a function call for other callers). The
    # encoder of ``origin``'s dialect writes it back verbatim, in its place; other encoders map a
    # tool call and report an opaque block in the access log's ``dropped``
    # (``gateway.dialects.items``). Deltas of an opaque block (Anthropic's ``input_json_delta`` of a
    # ``server_tool_use``) are ``ToolArgsDelta``s: the item's input, streamed.
    item: dict[str, Any] | None = None
    origin: str | None = None


@dataclass(slots=True)
class TextDelta:
    index: int
    text: str


@dataclass(slots=True)
class ToolArgsDelta:
    index: int
    fragment: str  # raw JSON text fragment; the concatenation is the arguments object


@dataclass(slots=True)
class ThinkingDelta:
    index: int
    text: str


@dataclass(slots=True)
class SignatureDelta:
    """A thinking signature exactly as the upstream sent it.

    Its origin is the upstream's dialect; an encoder for another dialect packs it with
    ``gateway.dialects.signatures.pack`` so it can come back on the next request and be restored.
    """

    index: int
    signature: str


@dataclass(slots=True)
class BlockStop:
    index: int


@dataclass(slots=True)
class Usage:
    input: int | None = None
    output: int | None = None
    cache_read: int | None = None
    cache_write: int | None = None
    reasoning: int | None = None
    tool_use: int | None = None


@dataclass(slots=True)
class End:
    reason: StopReason
    raw_reason: str | None = None
    stop_sequence: str | None = None  # the matched stop sequence, when the upstream says


@dataclass(slots=True)
class StreamError:
    """A failure inside a stream (or before it: the relay turns a leading one into an HTTP error).

    ``kind`` is one of ``gateway.errors.ErrorKind``; ``raw`` keeps the provider's own error type or
    code so a caller of the same dialect sees it unchanged.
    """

    kind: str
    message: str
    status: int = 502
    raw: str | None = None
    lasting: bool = False  # waiting cannot heal it (``GatewayError.lasting``): set by the dialect's decoder


Event = (
    MessageStart
    | BlockStart
    | TextDelta
    | ToolArgsDelta
    | ThinkingDelta
    | SignatureDelta
    | BlockStop
    | Usage
    | End
    | StreamError
)
