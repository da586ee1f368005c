"""``Exchange``: one model request on its way through the relay, as one object.

What the relay's stages all read — the caller's codec, the access record, where the answer goes
(``send``, the response headers so far), the trace, the parsed request and its route, what each
upstream attempt did — travels as one slotted dataclass instead of seven or eight parameters
handed from stage to stage. Plain attributes, no validation: it is built once per request on the
hot path. ``Attempt`` lives here too (the relay logs them; ``attempts.py`` fills them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from gateway.asgi import Send
    from gateway.dialects.base import Codec, EncodeContext
    from gateway.events import Usage
    from gateway.guardrails.engine import RequestGuard
    from gateway.ir import ChatRequest
    from gateway.relay.cache_ticket import Ticket
    from gateway.reply import ReplyBuilder
    from gateway.routing.router import Resolved
    from gateway.telemetry.observe import AccessRecord
    from gateway.telemetry.traces import RequestTrace

Headers = list[tuple[bytes, bytes]]


@dataclass(slots=True)
class Attempt:
    """One call to one upstream target, as the access log lists it."""

    provider: str
    upstream_model: str
    status: int | None = None
    error: str | None = None
    ms: float = 0.0
    usage: Usage | None = None  # what a failed attempt's upstream had reported before it failed


class Keeper(Protocol):
    """Keeps a stored answer (``relay.Persist``): folds its events, stores it at the end."""

    @property
    def builder(self) -> ReplyBuilder: ...

    async def done(self, ctx: EncodeContext) -> None: ...


@dataclass(slots=True)
class Exchange:
    """One request between the caller's bytes and the caller's bytes.

    ``req`` and ``resolved`` are set once the body is parsed and routed, before any stage that
    reads them runs. ``headers`` are the response headers so far (``x-request-id``, a key's rate
    limits, the settings the upstream was sent without); ``attempts`` grows as each upstream
    attempt starts, so a request cancelled meanwhile still logs what it tried.
    """

    codec: Codec
    record: AccessRecord
    send: Send
    headers: Headers
    trace: RequestTrace | None = None
    attempts: list[Attempt] = field(default_factory=list)
    persist: Keeper | None = None  # a stored (not detached) Responses answer
    cache: Ticket | None = None  # the response cache's part in this request ([cache] enabled)
    guard: RequestGuard | None = None  # the request's guardrails (gateway/guardrails/), when any apply
    req: ChatRequest = field(init=False)
    resolved: Resolved = field(init=False)
