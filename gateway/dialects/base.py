"""What one dialect codec provides. Each ``gateway/dialects/<name>/`` package exports ``CODEC``.

A codec is the only place that knows its wire format. It converts, in both directions:

* requests: caller JSON → ``ChatRequest`` (``parse_request``) and ``ChatRequest`` → upstream
  call (``build_request``; the gateway always asks upstreams for a stream, see gateway/relay/pipeline.py);
* streams: upstream SSE frames → events (``stream_decoder``) and events → caller bytes
  (``stream_encoder``);
* whole replies: upstream JSON → events (``decode_whole``) and ``Reply`` → caller JSON
  (``encode_whole``);
* errors: upstream error body → ``GatewayError`` (``decode_error``) and ``GatewayError`` →
  caller status + body (``render_error``);
* the same-dialect fast path (``fast_path``, a ``FastPathRules``, usually declared in the
  package's ``fast_path.py``): where its frames name the model, which frames hold the stop
  reason, optionally how a cut stream is closed in its own numbering and its own usage chunk.

It also answers every other question the gateway asks of a dialect, so nothing outside the
package names it: its auth headers (``auth_headers``), its names outside the gateway
(``identity``: OpenTelemetry, genai-prices), the paths its callers use (``routes``) and how their
SDK is recognised (``recognises``), the rate-limit headers its SDK reads (``rate_limit_headers``),
what its builder cannot carry (``limits``, ``params``). Optional parts are typed ``X | None``
members or named Protocols, never looked up with ``getattr``:

* ``models: ModelListing | None``: the ``GET /v1/models`` shapes (caller side);
* ``counting: TokenCounting | None``: the token-count endpoint's body and answer, and the
  provider's own counting call where it has one;
* ``stored: StoredObjects | None``: the provider keeps answers by id (a policy object, the
  package's ``stored.py``): ids, which requests detach or persist, what a ``GET`` answers, resume;
* ``Resumable`` (``isinstance(codec, Resumable)``): a dropped upstream stream can be continued;
* ``platforms: Mapping[str, OnPlatform]``: the dialect on a cloud platform (Bedrock, Vertex AI,
  Azure: gateway/platforms/), platform name → adapter, each in the package's ``<platform>.py``
  (as the anthropic SDK keeps ``lib/bedrock`` and ``lib/vertex`` inside its package); empty: the
  dialect runs only on its provider's own API.

Adding a dialect
----------------
1. A package ``gateway/dialects/<name>/`` (module name with ``_`` for ``-``):

   * ``__init__.py``: the codec class and ``CODEC``; its docstring says what the dialect is;
   * ``request_parse.py`` / ``request_build.py``: caller JSON → ``ChatRequest`` → upstream call;
   * ``stream_decode.py`` / ``stream_encode.py``: frames ⇄ events (the order of ``gateway/events.py``);
   * ``whole.py``: non-streamed bodies both ways; ``errors.py``: error bodies both ways;
   * ``stop_reasons.py``, ``usage.py``: the mappings to the canonical ``End`` / ``Usage``
     (``None`` where the wire does not say);
   * ``fields.py``: ``LIMITS`` (what the builder cannot carry: gateway/dialects/carry.py) and ``PARAMS``;
   * ``fast_path.py``: its ``FastPathRules``;
   * ``caller.py`` (a caller dialect): ``ROUTES``, ``recognises`` and, if it has them, the model
     list and token-count shapes; ``stored.py`` (a dialect with server-side state): its policy;
     ``ratelimit.py`` if its SDK reads rate-limit headers;
   * ``<platform>.py`` for each cloud platform that serves it (``bedrock.py``, ``vertex.py``,
     ``azure.py``): an ``OnPlatform`` adapter, listed in the codec's ``platforms`` (the platform
     refuses, at startup, a dialect without one).

   An upstream-only dialect (no caller endpoint) has ``routes = ()``, ``recognises`` always
   False and ``models`` / ``counting`` / ``stored`` / ``rate_limit_headers`` None.
2. One line in ``gateway/dialects/registry.py``'s ``MODULES``, placed by how specific its
   ``recognises`` is (asked in that order; OpenAI Chat, which recognises anything, stays last).
   Settings (a provider's ``dialect``), the route table (gateway/server/app.py) and the tests' dialect
   lists (tests/conftest.py ``UPSTREAM_DIALECTS``, tests/test_matrix.py) follow from it.
3. ``mypy --strict`` on the package: the codec must satisfy ``Codec`` below (``registry.codec_for``
   returns it as one), which names every member the pipeline reads.
4. Tests: ``tests/dialects/<name>/`` (or ``tests/dialects/test_<name>_*.py``) for the decoder and
   encoder over the recorded streams in ``captures-public/<name>/`` (skip cleanly when absent), the
   request parser and builder, stop reasons and usage; the fake upstream of tests/support/
   must speak it (``tests/support/fake_upstream.py``) for the caller × upstream matrix
   (tests/test_matrix.py), which then covers it with every other dialect.
5. Nothing else outside the package: docs/ (docs/dialects.md) and CONTRACT.md list the dialects for users.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from gateway.dialects.carry import Limit
from gateway.errors import GatewayError
from gateway.events import Event, StreamError, Usage
from gateway.framing.sse import SSEFrame
from gateway.ir import ChatRequest
from gateway.reply import Reply

if TYPE_CHECKING:
    from gateway.dialects.cloud import CloudSettings


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
    ``/chat/completions`` after ``https://api.openai.com/v1``). Auth headers are the provider's
    (``Codec.auth_headers`` through the platform, upstream.py), never here.
    """

    path: str
    body: dict[str, Any]
    params: dict[str, str] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    method: str = "POST"
    dropped: list[str] = field(default_factory=list)  # IR fields left out of this call (gateway/dialects/carry.py)


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
    auto_cache: bool = False  # Anthropic: prompt-cache breakpoints when the caller placed none (auto_cache.py)


@dataclass(slots=True)
class EncodeContext:
    """What an encoder needs besides the events."""

    model: str  # the model name the caller sent: shown back to it
    upstream_dialect: str  # origin of signatures in the events
    request: ChatRequest
    response_id: str | None = None  # stateful dialects: the id the gateway stores this answer under
    # output items the encoder could not express (``gateway.dialects.items.drop_output``): the
    # relay adds them to the access log's ``dropped`` once the answer is encoded
    dropped: list[str] = field(default_factory=list)


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


class UsageChunks(Protocol):
    """A dialect whose stream reports usage in a chunk of its own that callers ask for (OpenAI
    chat's ``choices: []`` chunk, ``stream_options.include_usage``). The gateway always asks the
    upstream for it; the fast path drops it for a caller that did not ask, and writes it from the
    decoded usage, before the terminator, where the upstream put its usage elsewhere."""

    def is_usage_chunk(self, data: str) -> bool:
        """Whether a frame is the usage chunk (called on every frame: substring checks first)."""
        ...

    def usage_chunk(self, last_chunk: str, caller_model: str, usage: Usage) -> bytes:
        """The encoded usage chunk, its ids taken from ``last_chunk`` (the last frame forwarded)."""
        ...


def _no_stop(event: str | None, data: str) -> bool:
    return False


@dataclass(frozen=True, slots=True)
class FastPathRules:
    """What the same-dialect fast path (gateway/relay/fast_path.py) must know of a dialect.

    ``carries_stop(event, data)``: whether a frame states the stop reason (some clients take a stop
    reason as the end, so such frames wait for the terminator). ``tail``: makes the per-stream
    ``FastPathTail``; without one, a cut stream ends with the encoder's own error frame.
    ``usage``: the dialect's usage chunk, where it has one of its own (``UsageChunks``).
    """

    model: ModelPlace
    carries_stop: Callable[[str | None, str], bool] = _no_stop
    tail: Callable[[], FastPathTail] | None = None
    usage: UsageChunks | None = None


RateLimitHeaders = Callable[[int | None, int | None, int | None, int | None, float], list[tuple[bytes, bytes]]]
"""``(rpm, requests_left, tpm, tokens_left, reset_in_seconds)`` → the rate-limit headers the
dialect's SDK reads (gateway/governance/limits.py)."""


@dataclass(frozen=True, slots=True)
class Identity:
    """What the dialect is called outside the gateway: the OpenTelemetry GenAI names of a call to
    its provider's own API (``gen_ai.provider.name``, ``gen_ai.operation.name``; gateway/telemetry/traces.py)
    and the provider id in the genai-prices database (gateway/governance/prices.py), used when the provider's
    ``base_url`` is not one the database knows."""

    otel_provider: str
    otel_operation: str = "chat"
    price_provider: str | None = None


@dataclass(frozen=True, slots=True)
class OwnAPI:
    """The provider's own public API, which the configuration used without a file adds when its
    key is in the environment (gateway/settings.py ``embedded_default``)."""

    provider: str  # the provider's name there
    base_url: str
    key_env: str
    models: tuple[str, ...]  # the model globs routed to it


@dataclass(frozen=True, slots=True)
class ModelAction:
    """One ``{model}:{action}`` of a ``model_action`` route: a model call (``stream`` set by the
    action) or a token count."""

    name: str
    kind: Literal["call", "count", "embed"] = "call"
    stream: bool | None = None


@dataclass(frozen=True, slots=True)
class CallerRoute:
    """One path the gateway serves to this dialect's callers (gateway/server/app.py builds its route
    table from these). ``kind``: ``call`` a model call, ``count`` token counting
    (``TokenCounting``), ``stored`` the stored-object operations (``StoredObjects``), ``embed``
    embeddings (gateway/endpoints/embeddings.py), ``model_action``
    a ``…/models/{model}:{action}`` path whose action picks one of the others (Gemini)."""

    path: str
    kind: Literal["call", "count", "stored", "model_action", "embed"] = "call"
    methods: tuple[str, ...] = ("POST",)
    actions: tuple[ModelAction, ...] = ()  # model_action only


class ModelListing(Protocol):
    """``GET /v1/models`` and ``GET /v1/models/{id}`` in this dialect's shape (gateway/endpoints/models.py)."""

    def entry(self, name: str, created: int) -> dict[str, Any]:
        """One model (``created``: the gateway's start, unix seconds)."""
        ...

    def listing(self, names: list[str], created: int) -> dict[str, Any]:
        """The whole list."""
        ...


class TokenCounting(Protocol):
    """Token counting (gateway/endpoints/count_tokens.py): the caller's endpoint and, where the provider's
    own API counts, the upstream call that asks it."""

    counts_upstream: bool  # the provider's own API counts (else: the gateway estimates)

    def caller_body(self, body: dict[str, Any]) -> dict[str, Any]:
        """The counting request's body as a model-call body this dialect's parser accepts."""
        ...

    def answer(self, tokens: int) -> dict[str, Any]:
        """The count, in this dialect's shape."""
        ...

    def upstream_call(self, call: UpstreamCall, upstream_model: str) -> UpstreamCall | None:
        """The model call ``call`` (as built for this dialect) turned into a counting call to
        the provider's API (asked only when ``counts_upstream``; ``None``: estimate). The answer
        is read as ``input_tokens`` or ``totalTokens``."""
        ...


class StoredObjects(Protocol):
    """A dialect whose provider keeps answers on the server (stored, resumable, cancellable by id):
    the policy gateway/relay/stateful.py and gateway/endpoints/stored.py follow for it."""

    kind: str  # the store's namespace and the noun in messages: "interaction", "response"
    previous_param: str  # the request parameter naming the stored answer a turn continues
    inputs_key: str  # where the stored object keeps this turn's input ("input_steps", "input_items")
    failed_status: str | None  # the stored object's status after a failure (None: as encoded)
    resume_param: str  # the query parameter of a resumed stream
    delete_answer_is_empty: bool  # DELETE answers ``{}`` (else ``{"id", "object", "deleted"}``)

    def new_id(self) -> str:
        """A fresh id for an answer the gateway stores."""
        ...

    def detaches(self, req: ChatRequest) -> bool:
        """Whether the request runs as a detached generation that outlives the caller."""
        ...

    def persists(self, req: ChatRequest) -> bool:
        """Whether a request that does not detach keeps its final object and history at the end."""
        ...

    def detach_problem(self, req: ChatRequest) -> GatewayError | None:
        """Why a detaching request is refused (before anything is sent or stored), or None."""
        ...

    def inputs(self, steps: list[Any], sid: str) -> list[Any]:
        """This turn's input items (as built for the dialect) as the stored object lists them."""
        ...

    def resume_point(self, query: dict[str, str]) -> int | None:
        """The event after which a resumed stream continues (None: from the start); raises a 400."""
        ...

    def timeline(self, obj: dict[str, Any], stored: dict[str, Any]) -> dict[str, Any]:
        """The object a ``GET`` answers, from the stored final object and the stored record."""
        ...

    def can_list_inputs(self) -> bool:
        """Whether ``GET …/{id}/input_items`` is served."""
        ...

    def cancel_problem(self, stored: dict[str, Any]) -> GatewayError | None:
        """Why a cancel of this stored object is refused, or None."""
        ...

    def not_found(self, sid: str) -> GatewayError:
        """The provider's answer to ``GET``/``DELETE``/cancel/… of an id it does not have; also
        what another caller key gets for an id that is not its own, so existence is not revealed."""
        ...

    def previous_not_found(self, sid: str) -> GatewayError:
        """The provider's answer to a new turn naming an unknown ``previous_param`` (or another key's)."""
        ...


@runtime_checkable
class Resumable(Protocol):
    """A codec whose upstream stream, dropped mid-way, can be picked up where it stopped instead of
    asked again (gateway/upstream/source.py; Interactions: ``GET`` with ``last_event_id``)."""

    def resume_call(self, decoder: StreamDecoder) -> UpstreamCall | None:
        """The call that continues the stream ``decoder`` has read so far (None: nothing to resume)."""
        ...

    def stream_ended(self, decoder: StreamDecoder) -> bool:
        """Whether ``decoder`` already saw the dialect's end (then EOF is simply the end)."""
        ...


Unwrap = Callable[[str, bytes], SSEFrame]
"""One message of a platform's binary event framing (its event type, its payload) → the frame the
dialect's decoder reads (gateway/framing/eventstream.py)."""


class OnPlatform(Protocol):
    """The dialect on one cloud platform: what changes about its calls there (gateway/platforms/).

    The platform keeps what is true of the platform whatever the dialect: its host, credentials,
    framing mechanism, its own error bodies and settings checks. The adapter holds what is true of
    this dialect there: its path, the body fields the platform wants moved or dropped, its token
    counting route, which variant of the platform's framing it streams in. An adapter may use a
    small helper of its platform's module (a path prefix, a version rule), imported inside the
    method so the dialect package imports without the platform's optional extra.

    Subclass it to inherit the defaults (no counting route, messages as they are)."""

    def adapt(self, call: UpstreamCall, upstream_model: str, s: CloudSettings) -> UpstreamCall:
        """The codec's call (built as for the provider's own API) as the platform wants it: path,
        query, body; what it cannot carry goes to ``dropped``."""
        ...

    def count_call(self, call: UpstreamCall, upstream_model: str, s: CloudSettings) -> UpstreamCall | None:
        """The codec's token-counting call (``TokenCounting.upstream_call``) on this platform;
        None: the platform has no counting route for the dialect (the gateway estimates)."""
        return None

    def unwrap(self) -> Unwrap | None:
        """How a message of the platform's binary event framing becomes this dialect's frame
        (Bedrock InvokeModel: the base64 ``chunk`` unwrapped); None: the message as it is
        (Converse's own events). Asked once per stream, only by a platform with such framing."""
        return None


class Codec(Protocol):
    """One dialect. The data members answer every question the pipeline asks of a dialect; the
    ``X | None`` members are the optional parts (None: the dialect has none)."""

    name: str
    fast_path: FastPathRules
    limits: Sequence[Limit]  # what this dialect's builder cannot carry (gateway/dialects/carry.py)
    params: dict[str, str]  # IR field -> this dialect's own parameter name, for refusals
    hints: Mapping[str, tuple[str, ...]]  # a caller's sampling hints with no IR slot (carry.lost_hints)
    identity: Identity
    routes: tuple[CallerRoute, ...]  # () for an upstream-only dialect (no caller endpoint)
    rate_limit_headers: RateLimitHeaders | None  # the headers its SDK reads for a key's limits
    models: ModelListing | None  # caller-facing model list
    counting: TokenCounting | None
    stored: StoredObjects | None  # the provider keeps answers by id
    own_api: OwnAPI | None  # served without a config file when its key is set
    platforms: Mapping[str, OnPlatform]  # cloud platform name -> adapter ({}: its own API only)

    def recognises(self, path: str, header_names: Collection[bytes], query_keys: Collection[str]) -> bool:
        """Whether a request (its path, lower-cased header names, query keys) comes from this
        dialect's SDK. Asked in registry order (the first yes wins) where the gateway answers
        before routing: an unknown path, the model list, a refused connection. False for an
        upstream-only dialect."""
        ...

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
