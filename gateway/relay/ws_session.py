"""What a Responses WebSocket connection keeps between its turns, and the turns it answers itself.

OpenAI's WebSocket mode chains every turn on ``previous_response_id`` with only the new items, and
Codex sends ``store: false``: the server keeps the connection's recent turns in memory, so the chain
works without storing anything. ``TurnMemory`` (``turn_memory``) is that memory, one per
connection, bounded (the oldest turn goes first): each kept turn is the conversation so far in the
IR's terms, thinking signatures included, so a continuation is rebuilt exactly as one over HTTP
from the store (``Stateful.prepare`` looks there first). A ``store: true`` turn goes to the store as
over HTTP, so its chain survives a reconnect and a replica change.

The relay finds the memory in the turn's ASGI scope under ``TURN_MEMORY`` (set by
``gateway.server.websocket``): a turn is the HTTP pipeline with another sink.

``"generate": false`` (Codex's prewarm) is answered here, never upstream: the request is checked and
parsed as any turn, its history is kept under a new real id, and the caller gets the stream of an
empty completed response (``response.created``, ``response.in_progress``, ``response.completed``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gateway.asgi import Scope
from gateway.dialects.base import EncodeContext, RequestMeta
from gateway.dialects.registry import codec_for
from gateway.dialects.validation import validate_request
from gateway.errors import GatewayError
from gateway.events import End
from gateway.relay.history import messages_to_json
from gateway.relay.stateful import stamped
from gateway.relay.turn_memory import Kept, TurnMemory
from gateway.reply import Reply

if TYPE_CHECKING:
    from gateway.relay.state import GatewayState
    from gateway.telemetry.observe import AccessRecord

DIALECT = "openai-responses"


def sse_payloads(data: bytes) -> tuple[list[bytes], bytes]:
    """Complete SSE frames in ``data`` → their ``data`` payloads (comments and keepalives dropped),
    and the unfinished rest. A Responses event's payload is its JSON, ``type`` and
    ``sequence_number`` included: what a WebSocket text frame carries."""
    payloads = []
    *frames, rest = data.split(b"\n\n")
    for frame in frames:
        lines = [line[5:].removeprefix(b" ") for line in frame.split(b"\n") if line.startswith(b"data:")]
        if lines:
            payloads.append(b"\n".join(lines))
    return payloads, rest


async def prewarm(
    state: GatewayState, scope: Scope, body: dict[str, Any], memory: TurnMemory, record: AccessRecord
) -> list[bytes]:
    """``generate: false``: the frames of an empty completed response, its request kept to chain on.
    Refusals (a key, a malformed body, an unknown model or previous id) raise as for any turn."""
    spec = await state.auth.authenticate(scope, {})
    if spec is not None:
        record.key = spec.name
    meta = RequestMeta(query={}, headers={}, stream=True)
    validate_request(DIALECT, body, meta)
    codec = codec_for(DIALECT)
    req = codec.parse_request(body, meta)
    req.dialect = DIALECT
    record.model, record.stream = req.model, True
    state.router.resolve(req.model)  # an unknown model is refused now, not on the first real turn
    stateful = state.stateful
    if stateful is None:
        raise GatewayError("api_error", "the gateway's store is not open yet", 503)
    turn = await stateful.prepare(req, DIALECT, spec, memory)
    stored = codec.stored
    assert stored is not None
    sid = stored.new_id()
    ctx = EncodeContext(model=req.model, upstream_dialect=DIALECT, request=req, response_id=sid)
    reply = Reply(id=sid, model=req.model, end=End("stop"))
    if req.store is False:  # kept as the connection keeps any turn: the request, no assistant turn
        memory.put(sid, Kept(list(req.messages), list(req.system), req.key_name))
    else:  # stored as over HTTP, so another socket or replica can chain on it
        kept: dict[str, Any] = {
            "object": codec.encode_whole(reply, ctx),
            "history": messages_to_json(req.messages),  # no assistant turn: nothing was generated
            "system": [p.text for p in req.system],
            **stateful._inputs(DIALECT, codec, req, turn, sid),
        }
        await stateful.store.put(stored.kind, sid, stamped(kept, req.key_name))
    payloads, _ = sse_payloads(codec.stream_encoder(ctx).encode(End("stop")))
    record.stop_reason = "stop"
    record.first_byte()
    return payloads
