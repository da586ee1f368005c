"""``GET`` / ``cancel`` / ``DELETE`` of stored interactions and responses, and resume by event id.

* ``GET /v1beta/interactions/{id}``: the whole timeline (with the ``user_input`` step);
  ``?stream=true&last_event_id=E`` replays the events after ``E`` (all without it) and follows the
  live tail until the end.
* ``GET /v1/responses/{id}``: the stored response; ``?stream=true&starting_after=N`` resumes a
  background response's stream after sequence number ``N``.
* ``POST …/{id}/cancel`` stops a running generation; ``DELETE …/{id}`` removes it and its events.

A stored object is its caller key's own (see gateway/relay/stateful.py): for an id that is another
key's, every operation here answers exactly as for an id that does not exist (the dialect's
``not_found``), touches nothing, and sends nothing upstream.

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
from gateway.relay.stateful import policy
from gateway.telemetry.observe import AccessRecord, request_id_for

if TYPE_CHECKING:
    from gateway.relay.state import GatewayState


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
            spec = await self.state.auth.authenticate(scope, query)
            if spec is not None:
                record.key = spec.name
            await self._handle(scope, receive, send, query, headers, record, spec.name if spec is not None else None)
        except GatewayError as err:
            status, body = codec.render_error(err)
            record.status, record.error_kind = status, err.kind
            if not record.response_started:
                await send_json(send, status, body, headers)
        finally:
            self.state.observer.finish(record)

    async def _handle(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        query: dict[str, str],
        headers: list[tuple[bytes, bytes]],
        record: AccessRecord,
        key_name: str | None,
    ) -> None:
        """``key_name``: the caller's named key (None: the shared key); it sees its own objects only."""
        stateful = self.state.stateful
        if stateful is None:
            raise GatewayError("overloaded", "the store is not open yet", 503)
        sid = scope["path_params"]["id"]
        action = scope["path_params"].get("action")
        method = scope["method"]
        stored_policy = policy(self.dialect)  # what differs between the stored dialects (their package's stored.py)
        noun = stored_policy.kind
        if action is not None and (action, method) not in (("cancel", "POST"), ("input_items", "GET")):
            raise GatewayError("not_found", f"no such operation: {method} …/{noun}s/{{id}}/{action}", 404)
        if method == "DELETE":
            if not await stateful.delete(self.dialect, sid, key_name):
                raise stored_policy.not_found(sid)
            body = {} if stored_policy.delete_answer_is_empty else {"id": sid, "object": noun, "deleted": True}
            await send_json(send, 200, body, headers)
            return
        if method == "GET" and action == "input_items" and stored_policy.can_list_inputs():
            listing = await stateful.input_items(self.dialect, sid, key_name)
            if listing is None:
                raise stored_policy.not_found(sid)
            if query.get("order") == "asc":
                listing["data"].reverse()
                listing["first_id"], listing["last_id"] = listing["last_id"], listing["first_id"]
            await send_json(send, 200, listing, headers)
            return
        if method == "POST" and action == "cancel":
            stored = await stateful.owned_object(self.dialect, sid, key_name)
            if stored is None:
                raise stored_policy.not_found(sid)
            refused = stored_policy.cancel_problem(stored)
            if refused is not None:
                raise refused
            obj = await stateful.cancel(self.dialect, sid, key_name)
            if obj is None:
                raise stored_policy.not_found(sid)
            await send_json(send, 200, obj, headers)
            return
        obj = await stateful.owned_object(self.dialect, sid, key_name, timeline=True)
        if obj is None:  # also another key's: the resume below is never reached for it
            raise stored_policy.not_found(sid)
        if query.get("stream", "").lower() != "true":
            await send_json(send, 200, obj, headers)
            return
        if await stateful.store.log_status(sid) is None:
            raise GatewayError(
                "invalid_request",
                f"{noun} {sid!r} has no event stream to resume (only stored/background generations have one)",
                400,
            )
        after = stored_policy.resume_point(query)
        req = ChatRequest(model=str(obj.get("model") or ""), dialect=self.dialect)
        record.model, record.stream, record.response_started = req.model, True, True
        finished = await run_until_disconnect(
            stateful.follow(self.dialect, codec_for(self.dialect), req, sid, after, send, headers), receive
        )
        if not finished:
            record.status, record.error_kind = 499, "client_gone"
