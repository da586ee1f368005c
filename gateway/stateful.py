"""Stateful streams: stored interactions and responses, detached generation, resume by event id.

Two dialects keep state on the server. Their requests come through the normal relay, which asks
this module three things (see ``Relay.serve``):

* ``prepare``: rebuild the history of ``previous_interaction_id`` / ``previous_response_id`` from
  the store (404 in the caller's dialect when unknown or expired);
* ``detaches``: a stored interaction (``store`` defaults to true) or a Responses request with
  ``background: true`` runs as a task that outlives the caller's connection, appending every
  encoded frame to the store's event log; the caller's stream is a ``follow`` of that log, so a
  caller that drops and comes back (``last_event_id`` / ``starting_after``) gets the rest exactly
  once, from any replica sharing the store;
* ``persist``: any other stored Responses request (``store`` true, the API's default) keeps only
  its final object and history at the end — it is *not* detached, so a caller hanging up still
  cancels its upstream at once.

A detached task heart-beats the store every second (a resume waiting on a dead replica ends with
an in-dialect error), learns about ``cancel`` from any replica through the heartbeat, and is
bounded by ``store.max_detached_seconds``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import socket
import time
from typing import TYPE_CHECKING, Any

from gateway.asgi import Send
from gateway.attempts import Opened, batches
from gateway.dialects.base import BuildOptions, Codec, EncodeContext
from gateway.errors import GatewayError
from gateway.events import End, Event, StreamError
from gateway.history import messages_from_json, messages_to_json, reply_message
from gateway.ir import ChatRequest, Message
from gateway.reply import Reply, ReplyBuilder
from gateway.store import OwnerGone, Store
from gateway.stream_writer import StreamWriter

if TYPE_CHECKING:
    from gateway.app import GatewayState

log = logging.getLogger("gateway.stateful")

INTERACTIONS = "gemini-interactions"
RESPONSES = "openai-responses"
KIND = {INTERACTIONS: "interaction", RESPONSES: "response"}
SSE_HEADERS = [(b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-cache"), (b"x-accel-buffering", b"no")]


def split_frames(data: bytes) -> list[bytes]:
    """Encoder output → one entry per SSE frame (a frame is one resumable event)."""
    if not data:
        return []
    return [part + b"\n\n" for part in data.split(b"\n\n") if part]


def new_stored_id(dialect: str) -> str:
    return ("v1_" if dialect == INTERACTIONS else "resp_") + secrets.token_urlsafe(18).replace("-", "x").replace("_", "y")


class Stateful:
    def __init__(self, state: GatewayState, store: Store) -> None:
        self.state = state
        self.store = store
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self.cancelling: set[str] = set()  # cancelled here by the cancel endpoint (not a shutdown)
        self.errors: dict[str, StreamError] = {}  # how a local generation failed, for its whole caller
        self.origins: dict[str, str] = {}
        self.max_seconds = state.settings.store.max_detached_seconds

    # ------------------------------------------------------------------ request side

    @staticmethod
    def handles(dialect: str) -> bool:
        return dialect in KIND

    async def prepare(self, req: ChatRequest, dialect: str) -> list[Message]:
        """Prepend the stored history of ``previous_id``; returns this turn's own messages."""
        turn = list(req.messages)
        if req.previous_id:
            stored = await self.store.get(KIND[dialect], req.previous_id)
            if stored is None or "history" not in stored:
                param = "previous_interaction_id" if dialect == INTERACTIONS else "previous_response_id"
                raise GatewayError("not_found", f"{param} {req.previous_id!r} is unknown or expired", 404, param=param)
            req.messages = messages_from_json(stored["history"]) + req.messages
            if not req.system and stored.get("system"):
                from gateway.ir import TextPart

                req.system = [TextPart(t) for t in stored["system"]]
        return turn

    @staticmethod
    def detaches(req: ChatRequest, dialect: str) -> bool:
        if dialect == INTERACTIONS:
            return req.store is not False
        return dialect == RESPONSES and req.background

    @staticmethod
    def persists(req: ChatRequest, dialect: str) -> bool:
        return dialect == RESPONSES and req.store is not False

    def _stored(self, dialect: str, codec: Codec, ctx: EncodeContext, reply: Reply, turn: list[Message], status: str | None = None) -> dict[str, Any]:
        """What the store keeps for one answer: the caller-facing object and the history so far."""
        obj = codec.encode_whole(reply, ctx)
        if status is not None:
            obj["status"] = status
        req = ctx.request
        history = req.messages + [reply_message(reply, ctx.upstream_dialect)]
        stored: dict[str, Any] = {"object": obj, "history": messages_to_json(history), "system": [p.text for p in req.system]}
        if dialect == INTERACTIONS:
            stored["input_steps"] = self._input_steps(codec, req, turn)
        else:
            stored["input_items"] = self._input_items(codec, req, turn, ctx.response_id or "")
        return stored

    @classmethod
    def _input_items(cls, codec: Codec, req: ChatRequest, turn: list[Message], sid: str) -> list[Any]:
        """This turn's input as ``GET /v1/responses/{id}/input_items`` lists it (each item with an id)."""
        items = []
        for n, item in enumerate(cls._input_steps(codec, req, turn)):
            item = dict(item)
            kind = item.setdefault("type", "message")
            prefix = {"message": "msg", "function_call": "fc", "function_call_output": "fco", "reasoning": "rs"}.get(kind, "item")
            item.setdefault("id", f"{prefix}_{sid[5:]}_{n}")
            if kind == "message" and isinstance(item.get("content"), str):
                part = "output_text" if item.get("role") == "assistant" else "input_text"
                item["content"] = [{"type": part, "text": item["content"]}]
            item.setdefault("status", "completed")
            items.append(item)
        return items

    @staticmethod
    def _input_steps(codec: Codec, req: ChatRequest, turn: list[Message]) -> list[Any]:
        body = codec.build_request(ChatRequest(model=req.model, messages=turn), req.model, BuildOptions()).body
        return list(body.get("input") or [])

    async def persist(self, dialect: str, codec: Codec, ctx: EncodeContext, reply: Reply, turn: list[Message]) -> None:
        assert ctx.response_id is not None
        try:
            await self.store.put(KIND[dialect], ctx.response_id, self._stored(dialect, codec, ctx, reply, turn))
        except Exception:  # a store outage must not turn a delivered answer into an error
            log.exception("could not store %s %s", KIND[dialect], ctx.response_id)

    # ------------------------------------------------------------------ detached generation

    async def start_detached(self, dialect: str, codec: Codec, req: ChatRequest, opened: Opened, turn: list[Message]) -> str:
        """Hand an opened upstream to a task that outlives the caller. The upstream is opened by
        the caller's request first, so failures before the first byte still get their HTTP status."""
        sid = new_stored_id(dialect)
        ctx = EncodeContext(model=req.model, upstream_dialect=opened.provider.dialect, request=req, response_id=sid)
        await self.store.claim(sid, self.owner)
        placeholder = codec.encode_whole(Reply(id=sid, model=req.model, end=End("stop")), ctx)
        placeholder["status"] = "in_progress"
        inputs = {"input_steps": self._input_steps(codec, req, turn)} if dialect == INTERACTIONS else {"input_items": self._input_items(codec, req, turn, sid)}
        await self.store.put(KIND[dialect], sid, {"object": placeholder, **inputs})
        task = asyncio.create_task(self._generate(dialect, codec, opened, ctx, turn))
        self.tasks[sid] = task
        task.add_done_callback(lambda _t: self.tasks.pop(sid, None))
        return sid

    async def _generate(self, dialect: str, codec: Codec, opened: Opened, ctx: EncodeContext, turn: list[Message]) -> None:
        sid = ctx.response_id
        assert sid is not None
        store = self.store
        builder = ReplyBuilder()
        encoder = codec.stream_encoder(ctx)
        me = asyncio.current_task()
        cancelled = False

        async def heartbeat() -> None:
            nonlocal cancelled
            while True:
                await asyncio.sleep(1.0)
                try:
                    if await store.heartbeat(sid, self.owner):
                        cancelled = True
                        if me is not None:
                            me.cancel()
                        return
                except Exception:
                    log.warning("heartbeat for %s failed", sid)

        beat = asyncio.create_task(heartbeat())
        status = "failed"
        source = opened.source

        stored_final = False

        async def store_final(status: str | None) -> None:
            nonlocal stored_final
            stored = self._stored(dialect, codec, ctx, builder.reply, turn, status)
            if builder.reply.error is not None:
                self.errors[sid], self.origins[sid] = builder.reply.error, ctx.upstream_dialect
                if len(self.errors) > 1000:  # only a waiting whole caller reads these: keep few
                    self.errors.pop(next(iter(self.errors)))
                    self.origins.pop(next(iter(self.origins)), None)
            if dialect == RESPONSES and builder.reply.error is not None and status is None:
                stored["object"]["status"] = "failed"
            await store.put(KIND[dialect], sid, stored)
            stored_final = True

        async def emit(events: list[Event]) -> None:
            for event in events:
                builder.add(event)
                data = encoder.encode(event)
                if type(event) is End or type(event) is StreamError:
                    # the final object is stored before the caller can see the end, so a GET right
                    # after the last event finds it
                    await store_final("cancelled" if type(event) is StreamError and event.kind == "cancelled" else None)
                for frame in split_frames(data):
                    await store.append(sid, frame)

        try:
            async with asyncio.timeout(self.max_seconds):
                async for batch in batches(opened):
                    await emit(batch)
        except asyncio.CancelledError:
            cancelled = cancelled or sid in self.cancelling
            if not cancelled:
                raise
            me.uncancel()  # type: ignore[union-attr]
            await emit([StreamError("cancelled", "cancelled on request", 499, "cancelled")])
        except TimeoutError:
            await emit([StreamError("timeout", f"generation exceeded {self.max_seconds:g}s", 504)])
        finally:
            self.cancelling.discard(sid)
            beat.cancel()
            await opened.close()
            reply = builder.reply
            if cancelled:
                status = "cancelled"
            elif reply.error is None and reply.end is not None:
                status = "completed"
            try:
                if not stored_final:
                    await store_final("cancelled" if cancelled else None)
                await store.finish(sid, status)
            except Exception:
                log.exception("could not finish stored %s %s", KIND[dialect], sid)

    # ------------------------------------------------------------------ caller side

    async def follow(self, dialect: str, codec: Codec, req: ChatRequest, sid: str, after: int | None, send: Send, headers: list[tuple[bytes, bytes]]) -> None:
        """Stream the log of ``sid`` after event ``after`` (all of it for None), then its live tail."""
        ctx = EncodeContext(model=req.model, upstream_dialect=dialect, request=req, response_id=sid)
        encoder = codec.stream_encoder(ctx)
        await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS + headers})
        writer = StreamWriter(send, encoder.keepalive(), self.state.settings.server.keepalive_seconds, 0)
        try:
            async for _seq, frame in self.store.follow(sid, after):
                await writer.write(frame)
        except OwnerGone:
            err = StreamError("bad_gateway", "the gateway replica running this generation stopped; start a new request", 502)
            await writer.write(encoder.encode(err))
        finally:
            writer.stop()
        await writer.write(b"", more=False)

    async def wait(self, sid: str, timeout: float) -> None:
        """Wait (bounded) until the log of ``sid`` is finished."""
        deadline = time.monotonic() + timeout
        task = self.tasks.get(sid)
        if task is not None:
            await asyncio.wait({asyncio.shield(task)}, timeout=timeout)
            return
        while time.monotonic() < deadline:
            status = await self.store.log_status(sid)
            if status is None or status.finished:
                return
            await asyncio.sleep(0.05)

    def failure(self, dialect: str, sid: str, obj: dict[str, Any]) -> GatewayError:
        """A failed stored generation as the error a whole caller gets (status and message kept)."""
        stream_error = self.errors.pop(sid, None)
        if stream_error is not None:
            return GatewayError(stream_error.kind, stream_error.message, stream_error.status, raw=stream_error.raw, origin=self.origins.pop(sid, None))
        error = obj.get("error") or (obj.get("errors") or [{}])[0]
        message = error.get("message") if isinstance(error, dict) else None
        return GatewayError("bad_gateway", message or "the generation failed", 502)

    async def stored_object(self, dialect: str, sid: str, *, timeline: bool = False) -> dict[str, Any] | None:
        stored = await self.store.get(KIND[dialect], sid)
        if stored is None:
            return None
        obj = dict(stored["object"])
        if timeline and dialect == INTERACTIONS:
            obj["steps"] = list(stored.get("input_steps") or []) + list(obj.get("steps") or [])
        return obj

    async def input_items(self, sid: str) -> dict[str, Any] | None:
        stored = await self.store.get(KIND[RESPONSES], sid)
        if stored is None:
            return None
        data = list(reversed(stored.get("input_items") or []))  # the API lists newest first by default
        return {"object": "list", "data": data, "first_id": data[0]["id"] if data else None, "last_id": data[-1]["id"] if data else None, "has_more": False}

    async def cancel(self, dialect: str, sid: str) -> dict[str, Any] | None:
        status = await self.store.log_status(sid)
        if status is not None and not status.finished:
            await self.store.request_cancel(sid)
            task = self.tasks.get(sid)
            if task is not None:
                self.cancelling.add(sid)
                task.cancel()  # ours: no need to wait for the heartbeat
            await self.wait(sid, 5.0)
        return await self.stored_object(dialect, sid)

    async def delete(self, dialect: str, sid: str) -> bool:
        task = self.tasks.get(sid)
        if task is not None:
            await self.store.request_cancel(sid)
            self.cancelling.add(sid)
            task.cancel()
            await asyncio.wait({task}, timeout=2.0)
        return await self.store.delete(KIND[dialect], sid)

