"""What one dialect codec provides. Each ``gateway/dialects/<name>/`` package exports ``CODEC``.

A codec is the only place that knows its wire format. It converts, in both directions:

* requests: caller JSON → ``ChatRequest`` (``parse_request``) and ``ChatRequest`` → upstream HTTP
  call (``build_request``; the gateway always asks upstreams for a stream, see relay.py);
* streams: upstream SSE frames → events (``stream_decoder``) and events → caller bytes
  (``stream_encoder``);
* whole replies: upstream JSON → events (``decode_whole``) and ``Reply`` → caller JSON
  (``encode_whole``);
* errors: upstream error body → ``GatewayError`` (``decode_error``) and ``GatewayError`` →
  caller status + body (``render_error``);
* the same-dialect fast path (``fast_path``, a ``FastPathRules``, usually declared in the
  package's ``fast_path.py``): where its frames name the model, which frames hold the stop
  reason, and, optionally, how a cut stream is closed in its own numbering.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from gateway.carry import Limit
from gateway.errors import GatewayError
from gateway.events import Event, StreamError, Usage
from gateway.ir import ChatRequest
from gateway.reply import Reply
from gateway.sse import SSEFrame


@dataclass(slots=True)
class RequestMeta:
    """What the HTTP layer knows beyond the JSON body."""

    path_model: str | None = None  # Gemini puts the model in the URL
    query: dict[str, str] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)  # lower-cased names
    stream: bool | None = None  # set when the URL decides streaming (Gemini); overrides the body


@dataclass(slots=True)
class UpstreamCall:
    """One HTTP request to an upstream, relative to the provider's ``base_url``.

    ``path`` is appended to the base URL as the provider's own SDK would (for example
    ``/chat/completions`` after ``https://api.openai.com/v1``). Auth headers are added by
    upstream.py, never here.
    """

    path: str
    body: dict[str, Any]
    params: dict[str, str] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    method: str = "POST"
    dropped: list[str] = field(default_factory=list)  # IR fields left out of this call (gateway/carry.py)


@dataclass(slots=True)
class BuildOptions:
    """Provider settings a builder may need."""

    default_max_tokens: int = 8192  # for dialects that require a limit (Anthropic)
    dropped_betas: tuple[str, ...] = ()  # anthropic-beta values not to forward
    gemini_parameters_json_schema: bool = False  # send tool schemas as parametersJsonSchema (Gemini)
    stream: bool = True  # ask the upstream for a stream (the caller's mode; detached runs always stream)
    # Anthropic model globs (None: the dialect's own list, anthropic/models.py): the models that refuse
    # temperature with top_p, and those asked for thinking as adaptive + output_config.effort.
    sampling_exclusive_models: tuple[str, ...] | None = None
    adaptive_thinking_models: tuple[str, ...] | None = None


@dataclass(slots=True)
class EncodeContext:
    """What an encoder needs besides the events."""

    model: str  # the model name the caller sent: shown back to it
    upstream_dialect: str  # origin of signatures in the events
    request: ChatRequest
    response_id: str | None = None  # stateful dialects: the id the gateway stores this answer under


class StreamDecoder(Protocol):
    def feed(self, frame: SSEFrame) -> list[Event]:
        """Events for one SSE frame. Unknown events/fields: log a warning, return what is known."""

    def close(self) -> list[Event]:
        """The body ended cleanly. Returns ``[]`` if ``End``/``StreamError`` was already emitted,
        ``[End]`` where EOF is the dialect's terminator (Gemini after a finishReason), else
        ``[StreamError("truncated", ...)]``."""

    def usage_so_far(self) -> Usage | None:
        """The usage the frames fed so far reported, cumulative (``None``: the upstream stated none).

        Read once when a request ends, however it ends: a cut, an idle timeout, the caller hanging
        up or an in-stream error before any content then still keeps what the upstream already
        reported, also where the dialect holds usage back until its end (Gemini, OpenAI chat)."""


class StreamEncoder(Protocol):
    def encode(self, event: Event) -> bytes:
        """Bytes for one event (may be empty). After ``End`` or ``StreamError`` the caller's stream
        is complete: the encoder has written the dialect's terminator or error frame."""

    def keepalive(self) -> bytes:
        """Bytes that keep an idle connection open without changing the answer."""


@dataclass(frozen=True, slots=True)
class ModelPlace:
    """Where a dialect's stream frames name the model: ``frame[parent][key]``, or ``frame[key]``
    when ``parent`` is None. The fast path renames the model there and nowhere else, so a model
    called ``text`` never touches ``"type":"text"``."""

    key: str
    parent: str | None = None


class FastPathTail(Protocol):
    """Per-stream state for a dialect whose error ending continues the upstream's own frames
    (Responses: the next ``sequence_number`` and the ``response`` object of ``response.created``)."""

    def note(self, event: str | None, data: str) -> None:
        """Called with every frame forwarded (after the model rename)."""

    def error_frames(self, err: StreamError, caller_model: str) -> bytes:
        """The dialect's error ending for a stream the gateway has to cut short."""


def _no_stop(event: str | None, data: str) -> bool:
    return False


@dataclass(frozen=True, slots=True)
class FastPathRules:
    """What the same-dialect fast path (gateway/passthrough.py) must know of a dialect.

    ``carries_stop(event, data)``: whether a frame states the stop reason (some clients take a stop
    reason as the end, so such frames wait for the terminator). ``tail``: makes the per-stream
    ``FastPathTail``; without one, a cut stream ends with the encoder's own error frame.
    """

    model: ModelPlace
    carries_stop: Callable[[str | None, str], bool] = _no_stop
    tail: Callable[[], FastPathTail] | None = None


class Codec(Protocol):
    name: str
    fast_path: FastPathRules
    limits: Sequence[Limit]  # what this dialect's builder cannot carry (gateway/carry.py)
    params: dict[str, str]  # IR field -> this dialect's own parameter name, for refusals

    def auth_headers(self, key: str | None) -> dict[str, str]:
        """Headers that authenticate (and version) a request to the provider's own API with ``key``
        (None: no key configured). A cloud platform replaces them with its own (gateway/platforms/)."""
        ...

    def parse_request(self, body: dict[str, Any], meta: RequestMeta) -> ChatRequest: ...

    def build_request(self, req: ChatRequest, upstream_model: str, options: BuildOptions) -> UpstreamCall: ...

    def stream_decoder(self) -> StreamDecoder: ...

    def decode_whole(self, body: dict[str, Any]) -> list[Event]: ...

    def decode_error(self, status: int, body: bytes) -> GatewayError: ...

    def stream_encoder(self, ctx: EncodeContext) -> StreamEncoder: ...

    def encode_whole(self, reply: Reply, ctx: EncodeContext) -> dict[str, Any]: ...

    def render_error(self, err: GatewayError) -> tuple[int, dict[str, Any]]: ...
