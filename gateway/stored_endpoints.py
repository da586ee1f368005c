"""``GET`` / ``cancel`` / ``DELETE`` of stored interactions and responses, and resume by event id.

* ``GET /v1beta/interactions/{id}``: the whole timeline (with the ``user_input`` step);
  ``?stream=true&last_event_id=E`` replays the events after ``E`` (all without it) and follows the
  live tail until the end.
* ``GET /v1/responses/{id}``: the stored response; ``?stream=true&starting_after=N`` resumes a
  background response's stream after sequence number ``N``.
* ``POST …/{id}/cancel`` stops a running generation; ``DELETE …/{id}`` removes it and its events.

Each answer carries the request's ``x-request-id`` (a resumed stream in its response headers,
before its first event) and each request has its access-log line; a resume or a replay carries no
usage of its own: the generation's usage belongs to the request that started it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import parse_qsl

from gateway.asgi import Receive, Scope, Send, run_until_disconnect, send_json
from gateway.dialects.registry import codec_for
from gateway.errors import GatewayError
from gateway.ir import ChatRequest
from gateway.observe import AccessRecord, request_id_for
from gateway.stateful import INTERACTIONS

if TYPE_CHECKING:
    from gateway.state import GatewayState


def _resume_point(dialect: str, query: dict[str, str]) -> int | None:
    if dialect == INTERACTIONS:
        value = query.get("last_event_id")
        if not value:
            return None
        from gateway.dialects.gemini_interactions import parse_event_id

        seq = parse_event_id(value)
        if seq is None:
            raise GatewayError("invalid_request", f"last_event_id {value!r} is not an event id of this gateway", 400, param="last_event_id")
        return seq
    value = query.get("starting_after")
    if value is None or value == "":
        return None
    if not value.lstrip("-").isdigit():
        raise GatewayError("invalid_request", "starting_after must be an integer sequence number", 400, param="starting_after")
    return int(value)


class StoredEndpoint:
    """One ASGI endpoint per dialect for the three stored-object operations."""

    def __init__(self, state: GatewayState, dialect: str) -> None:
        self.state = state
        self.dialect = dialect

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        codec = codec_for(self.dialect)
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        request_id = request_id_for(scope)
        headers = [(b"x-request-id", request_id.encode())]
        record = AccessRecord(request_id, self.dialect, scope["path"])
        try:
            spec = self.state.auth.authenticate(scope, query)
            if spec is not None:
                record.key = spec.name
            await self._handle(scope, receive, send, query, headers, record)
        except GatewayError as err:
            status, body = codec.render_error(err)
            record.status, record.error_kind = status, err.kind
            if not record.response_started:
                await send_json(send, status, body, headers)
        finally:
            self.state.observer.finish(record)

    async def _handle(self, scope: Scope, receive: Receive, send: Send, query: dict[str, str], headers: list[tuple[bytes, bytes]], record: AccessRecord) -> None:
        stateful = self.state.stateful
        if stateful is None:
            raise GatewayError("overloaded", "the store is not open yet", 503)
        sid = scope["path_params"]["id"]
        action = scope["path_params"].get("action")
        method = scope["method"]
        noun = "interaction" if self.dialect == INTERACTIONS else "response"
        if action is not None and (action, method) not in (("cancel", "POST"), ("input_items", "GET")):
            raise GatewayError("not_found", f"no such operation: {method} …/{noun}s/{{id}}/{action}", 404)
        if method == "DELETE":
            if not await stateful.delete(self.dialect, sid):
                raise GatewayError("not_found", f"{noun} {sid!r} not found", 404)
            body = {} if self.dialect == INTERACTIONS else {"id": sid, "object": "response", "deleted": True}
            await send_json(send, 200, body, headers)
            return
        if method == "GET" and action == "input_items" and self.dialect != INTERACTIONS:
            listing = await stateful.input_items(sid)
            if listing is None:
                raise GatewayError("not_found", f"response {sid!r} not found or expired", 404)
            if query.get("order") == "asc":
                listing["data"].reverse()
                listing["first_id"], listing["last_id"] = listing["last_id"], listing["first_id"]
            await send_json(send, 200, listing, headers)
            return
        if method == "POST" and action == "cancel":
            if self.dialect != INTERACTIONS:
                stored = await stateful.stored_object(self.dialect, sid)
                if stored is None:
                    raise GatewayError("not_found", f"response {sid!r} not found", 404)
                if not stored.get("background"):  # as OpenAI: a finished background one is returned as is
                    raise GatewayError("invalid_request", "Only responses created with background=true can be cancelled.", 400)
            obj = await stateful.cancel(self.dialect, sid)
            if obj is None:
                raise GatewayError("not_found", f"{noun} {sid!r} not found", 404)
            await send_json(send, 200, obj, headers)
            return
        obj = await stateful.stored_object(self.dialect, sid, timeline=True)
        if obj is None:
            raise GatewayError("not_found", f"{noun} {sid!r} not found or expired", 404)
        if query.get("stream", "").lower() != "true":
            await send_json(send, 200, obj, headers)
            return
        if await stateful.store.log_status(sid) is None:
            raise GatewayError("invalid_request", f"{noun} {sid!r} has no event stream to resume (only stored/background generations have one)", 400)
        after = _resume_point(self.dialect, query)
        req = ChatRequest(model=str(obj.get("model") or ""), dialect=self.dialect)
        record.model, record.stream, record.response_started = req.model, True, True
        finished = await run_until_disconnect(stateful.follow(self.dialect, codec_for(self.dialect), req, sid, after, send, headers), receive)
        if not finished:
            record.status, record.error_kind = 499, "client_gone"
