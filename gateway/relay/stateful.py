"""Stateful streams: stored interactions and responses, detached generation, resume by event id.

Dialects whose codec has a ``stored`` policy (``StoredObjects`` in gateway/dialects/base.py:
Interactions, Responses) keep state on the server; what differs between them (ids, which requests
detach, what the stored object lists) is the policy's, in the dialect's package. Their requests
come through the normal relay, which asks this module three things (see ``Relay.serve``):

* ``prepare``: rebuild the history of ``previous_interaction_id`` / ``previous_response_id`` from
  the store (the provider's own not-found answer when unknown, expired or another key's);
* ``detaches`` (the policy's): a stored interaction (``store`` defaults to true) or a Responses
  request with ``background: true`` runs as a task that outlives the caller's connection, appending every
  encoded frame to the store's event log; the caller's stream is a ``follow`` of that log, so a
  caller that drops and comes back (``last_event_id`` / ``starting_after``) gets the rest exactly
  once, from any replica sharing the store;
* ``persist``: any other stored Responses request (``store`` true, the API's default) keeps only
  its final object and history at the end — it is *not* detached, so a caller hanging up still
  cancels its upstream at once.

A detached task heart-beats the store every second (a resume waiting on a dead replica ends with
an in-dialect error; one in the same process never gives up a task that is running, see
``store.base.Liveness``), learns about ``cancel`` from any replica through the heartbeat, and is
bounded by ``store.max_detached_seconds``. Every way it can be stopped (cancel, timeout,
shutdown) is a ``Run.request_stop``: the stop's error is its last event, so every open stream of
it ends in the dialect's terms (a cancel as status ``cancelled``). Its events also feed the access
record of the request that started it (``Meter``), finished once when both are done.

Stored objects are the caller key's own. Each records the *name* of the named key that created it
(``key_name`` in its JSON; absent for the shared key: open access or the plain ``[auth]`` list),
and every access by id — ``GET``, ``DELETE``, cancel, ``input_items``, resume, and chaining with
``previous_*`` — is served only to the same name (``owns``). Another key gets exactly the answer
for an id that does not exist (the policy's ``not_found`` / ``previous_not_found``), so nothing
tells it the id exists, and nothing is sent upstream. The name is the identity: a key rotated
(re-created under the same name) keeps its objects. A record written before owners were kept has
no ``key_name`` and so is the shared key's: still readable where no named keys are used (as
before), never by a named key — we cannot tell whose it was, and any key seeing it is the leak
this closes. An ``[admin]`` key is not a caller key and reads no stored object.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import socket
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from gateway.asgi import Send
from gateway.dialects.base import BuildOptions, Codec, EncodeContext, StoredObjects
from gateway.dialects.registry import codec_for
from gateway.errors import GatewayError
from gateway.events import End, Event, StreamError, Usage
from gateway.governance.keys import KeySpec
from gateway.ir import ChatRequest, Message
from gateway.relay.attempts import Opened, batches
from gateway.relay.history import messages_from_json, messages_to_json, reply_message
from gateway.relay.stream_writer import StreamWriter
from gateway.relay.turn_memory import Kept, TurnMemory
from gateway.reply import Reply, ReplyBuilder
from gateway.store import OwnerGone, Store
from gateway.upstream.source import EventSource

if TYPE_CHECKING:
    from gateway.settings import Settings

log = logging.getLogger("gateway.stateful")

HEARTBEAT_SECONDS = 1.0  # how often a running generation renews its heartbeat (and hears of a cancel)
SSE_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


def split_frames(data: bytes) -> list[bytes]:
    """Encoder output → one entry per SSE frame (a frame is one resumable event)."""
    if not data:
        return []
    return [part + b"\n\n" for part in data.split(b"\n\n") if part]


def cancelled_on_request() -> StreamError:
    return StreamError("cancelled", "cancelled on request", 499, "cancelled")


class Meter(Protocol):
    """What a detached generation reports to: every batch of events it logs, and its end. Held by
    the request that started it and by the generation; finished by the last to let go."""

    def events(self, batch: list[Event]) -> None: ...
    def hold(self) -> None: ...
    def release(self) -> None: ...


class Run:
    """The controls of one local generation. A stop (cancel, timeout, shutdown) never cancels the
    task at an arbitrary await: it is noted here, and the task is interrupted only while it waits
    on the upstream. Writing to the event log is never cut in the middle, so the log always ends
    with the stop's own terminal events (a follower sees ``cancelled``, not a silent end), and
    event ids stay equal to store sequence numbers."""

    __slots__ = ("task", "reading", "stop", "interrupted")

    def __init__(self) -> None:
        self.task: asyncio.Task[None] | None = None
        self.reading = False  # awaiting the upstream: the one place a stop may interrupt
        self.stop: StreamError | None = None  # why it must end, written as its last event
        self.interrupted = False  # we cancelled the upstream read (to tell from other cancels)

    def request_stop(self, why: StreamError) -> None:
        if self.stop is not None or self.task is None or self.task.done():
            return  # the first reason wins; a finished generation stays as it ended
        self.stop = why
        if self.reading:
            self.interrupted = True
            self.task.cancel()


def policy(dialect: str) -> StoredObjects:
    """The stored-object policy of ``dialect`` (its codec's ``stored``; only such dialects get here)."""
    stored = codec_for(dialect).stored
    assert stored is not None, f"{dialect} keeps no state"
    return stored


def new_stored_id(dialect: str) -> str:
    return policy(dialect).new_id()


KEY_FIELD = "key_name"  # where a stored record keeps the name of the key that created it


def owns(stored: dict[str, Any], key_name: str | None) -> bool:
    """Whether the caller key ``key_name`` (None: the shared key) may see this stored record. A
    record without the field (the shared key's, or written before owners were kept) is the shared
    key's: a named key never sees it."""
    return stored.get(KEY_FIELD) == key_name


def stamped(record: dict[str, Any], key_name: str | None) -> dict[str, Any]:
    """``record`` marked as ``key_name``'s (the shared key's are left unmarked, as before)."""
    if key_name is not None:
        record[KEY_FIELD] = key_name
    return record


class Stateful:
    def __init__(self, settings: Settings, store: Store) -> None:
        self.settings = settings
        self.store = store
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        self.tasks: dict[str, asyncio.Task[None]] = {}  # the generations this process runs
        self.runs: dict[str, Run] = {}
        self.errors: dict[str, StreamError] = {}  # how a local generation failed, for its whole caller
        self.origins: dict[str, str] = {}
        self.max_seconds = settings.store.max_detached_seconds
        self.owner_timeout = settings.store.owner_timeout_seconds

    # ------------------------------------------------------------------ request side

    @staticmethod
    def handles(dialect: str) -> bool:
        return codec_for(dialect).stored is not None

    async def prepare(
        self, req: ChatRequest, dialect: str, caller: KeySpec | None, memory: TurnMemory | None = None
    ) -> list[Message]:
        """Prepend the stored history of ``previous_id``; returns this turn's own messages.
        ``caller`` (the authenticated key; None for the shared key) becomes ``req.key_name``: only
        its own stored turns can be continued, and what this request stores is its own.
        ``memory``: a WebSocket connection's own recent turns (``ws_session``), looked in first."""
        req.key_name = caller.name if caller is not None else None
        turn = list(req.messages)
        if req.previous_id:
            kept = memory.get(req.previous_id) if memory is not None else None
            if kept is not None and kept.key_name == req.key_name:
                req.messages = [*kept.messages, *req.messages]
                if not req.system and kept.system:
                    req.system = list(kept.system)
                return turn
            stored = await self.store.get(policy(dialect).kind, req.previous_id)
            if stored is None or "history" not in stored or not owns(stored, req.key_name):
                raise policy(dialect).previous_not_found(req.previous_id)
            req.messages = messages_from_json(stored["history"]) + req.messages
            if not req.system and stored.get("system"):
                from gateway.ir import TextPart

                req.system = [TextPart(t) for t in stored["system"]]
        return turn

    @staticmethod
    def detaches(req: ChatRequest, dialect: str) -> bool:
        return policy(dialect).detaches(req)

    @staticmethod
    def persists(req: ChatRequest, dialect: str) -> bool:
        return policy(dialect).persists(req)

    def _stored(
        self,
        dialect: str,
        codec: Codec,
        ctx: EncodeContext,
        reply: Reply,
        turn: list[Message],
        status: str | None = None,
    ) -> dict[str, Any]:
        """What the store keeps for one answer: the caller-facing object and the history so far."""
        obj = codec.encode_whole(reply, ctx)
        if status is not None:
            obj["status"] = status
        req = ctx.request
        history = req.messages + [reply_message(reply, ctx.upstream_dialect)]
        stored: dict[str, Any] = {
            "object": obj,
            "history": messages_to_json(history),
            "system": [p.text for p in req.system],
        }
        stored.update(self._inputs(dialect, codec, req, turn, ctx.response_id or ""))
        return stamped(stored, req.key_name)

    @staticmethod
    def _inputs(dialect: str, codec: Codec, req: ChatRequest, turn: list[Message], sid: str) -> dict[str, list[Any]]:
        """This turn's input as the stored object lists it, under the policy's key."""
        body = codec.build_request(ChatRequest(model=req.model, messages=turn), req.model, BuildOptions()).body
        stored = policy(dialect)
        return {stored.inputs_key: stored.inputs(list(body.get("input") or []), sid)}

    async def persist(
        self,
        dialect: str,
        codec: Codec,
        ctx: EncodeContext,
        reply: Reply,
        turn: list[Message],
        memory: TurnMemory | None = None,
    ) -> None:
        """Keep the answer for a later ``previous_id``: in the store, or, for a ``store: false`` turn
        on a WebSocket connection, in that connection's ``memory`` only."""
        assert ctx.response_id is not None
        if memory is not None:
            req = ctx.request
            history = [*req.messages, reply_message(reply, ctx.upstream_dialect)]
            memory.put(ctx.response_id, Kept(history, list(req.system), req.key_name))
            return
        try:
            await self.store.put(policy(dialect).kind, ctx.response_id, self._stored(dialect, codec, ctx, reply, turn))
        except Exception:  # a store outage must not turn a delivered answer into an error
            log.exception("could not store %s %s", policy(dialect).kind, ctx.response_id)

    # ------------------------------------------------------------------ detached generation

    async def start_detached(
        self,
        dialect: str,
        codec: Codec,
        req: ChatRequest,
        opened: Opened,
        turn: list[Message],
        meter: Meter | None = None,
    ) -> str:
        """Hand an opened upstream to a task that outlives the caller. The upstream is opened by
        the caller's request first, so failures before the first byte still get their HTTP status.
        ``meter`` sees every event of the generation and is released once when it ends (the
        access record of the request that started it: see ``Relay._detached``)."""
        sid = new_stored_id(dialect)
        ctx = EncodeContext(model=req.model, upstream_dialect=opened.provider.dialect, request=req, response_id=sid)
        await self.store.claim(sid, self.owner)
        placeholder = codec.encode_whole(Reply(id=sid, model=req.model, end=End("stop")), ctx)
        placeholder["status"] = "in_progress"
        inputs = self._inputs(dialect, codec, req, turn, sid)
        await self.store.put(policy(dialect).kind, sid, stamped({"object": placeholder, **inputs}, req.key_name))
        run = Run()
        if meter is not None:
            meter.hold()  # from here on the generation holds the record too
        task = asyncio.create_task(self._generate(dialect, codec, opened, ctx, turn, run, meter))
        run.task = task
        self.tasks[sid], self.runs[sid] = task, run

        def forget(_t: asyncio.Task[None]) -> None:
            self.tasks.pop(sid, None)
            self.runs.pop(sid, None)

        task.add_done_callback(forget)
        return sid

    async def _generate(
        self,
        dialect: str,
        codec: Codec,
        opened: Opened,
        ctx: EncodeContext,
        turn: list[Message],
        run: Run,
        meter: Meter | None,
    ) -> None:
        sid = ctx.response_id
        assert sid is not None
        store = self.store
        builder = ReplyBuilder()
        encoder = codec.stream_encoder(ctx)

        async def heartbeat() -> None:
            while True:
                await asyncio.sleep(HEARTBEAT_SECONDS)
                try:
                    if await store.heartbeat(sid, self.owner):
                        run.request_stop(cancelled_on_request())
                        return
                except Exception:
                    log.warning("heartbeat for %s failed", sid)

        beat = asyncio.create_task(heartbeat())
        deadline = asyncio.get_running_loop().call_later(
            self.max_seconds,
            run.request_stop,
            StreamError("timeout", f"generation exceeded {self.max_seconds:g}s", 504),
        )
        source = opened.source
        stored_final = False

        async def store_final() -> None:
            nonlocal stored_final
            reply = builder.reply
            cancelled = reply.error is not None and reply.error.kind == "cancelled"
            stored = self._stored(dialect, codec, ctx, reply, turn, "cancelled" if cancelled else None)
            if reply.error is not None and not cancelled:
                self.errors[sid], self.origins[sid] = reply.error, ctx.upstream_dialect
                if len(self.errors) > 1000:  # only a waiting whole caller reads these: keep few
                    self.errors.pop(next(iter(self.errors)))
                    self.origins.pop(next(iter(self.origins)), None)
                failed_status = policy(dialect).failed_status
                if failed_status is not None:
                    stored["object"]["status"] = failed_status
            await store.put(policy(dialect).kind, sid, stored)
            stored_final = True

        async def emit(events: list[Event]) -> bool:
            """Log the encoded events; True once the generation has ended."""
            if events and type(events[-1]) is StreamError:
                events = self._with_usage_so_far(source, builder.reply.usage, events)
            if meter is not None:
                meter.events(events)
            for event in events:
                builder.add(event)
                data = encoder.encode(event)
                if type(event) is End or type(event) is StreamError:
                    # the final object is stored before the caller can see the end, so a GET right
                    # after the last event finds it
                    await store_final()
                    for frame in split_frames(data):
                        await store.append(sid, frame)
                    return True
                for frame in split_frames(data):
                    await store.append(sid, frame)
            return False

        upstream = batches(opened)
        ended = False
        try:
            while not ended:
                if run.stop is not None:
                    ended = await emit([run.stop])
                    break
                run.reading = True  # the only await a stop may interrupt: nothing is half-written
                try:
                    batch = await upstream.__anext__()
                except StopAsyncIteration:
                    break
                except asyncio.CancelledError:
                    if not run.interrupted:
                        raise  # not ours (the loop is closing): nothing can be written any more
                    run.interrupted = False
                    task = asyncio.current_task()
                    if task is not None:  # always, inside a task; the cancel was ours: take it back
                        task.uncancel()
                    continue
                finally:
                    run.reading = False
                ended = await emit(batch)
        except Exception:
            log.exception("detached generation %s failed inside the gateway", sid)
            if not ended:  # best effort: followers get an in-dialect end, not a hang until the owner is judged gone
                try:
                    ended = await emit([StreamError("api_error", "internal gateway error mid-generation", 500)])
                except Exception:
                    log.exception("could not end the event log of %s", sid)
        finally:
            beat.cancel()
            deadline.cancel()
            try:
                reply = builder.reply
                if reply.error is not None and reply.error.kind == "cancelled":
                    status = "cancelled"
                elif reply.error is None and reply.end is not None:
                    status = "completed"
                else:
                    status = "failed"
                if not stored_final:
                    await store_final()
                await store.finish(sid, status)  # followers end now, whatever closing the upstream takes
            except Exception:
                log.exception("could not finish stored %s %s", policy(dialect).kind, sid)
            try:
                await upstream.aclose()  # type: ignore[attr-defined]  # an async generator
                await opened.close()  # (and routing: the target has one fewer in flight)
            except Exception:
                log.exception("could not close the upstream of %s", sid)
            finally:
                if meter is not None:
                    meter.release()

    @staticmethod
    def _with_usage_so_far(source: EventSource, known: Usage, events: list[Event]) -> list[Event]:
        """A generation ending in error (cancelled, cut, timed out) keeps the usage its upstream
        reported so far, also where the dialect holds usage back until its end (Gemini): the
        source's ``usage_so_far`` goes in as a ``Usage`` just before the error, so the stored
        object, the caller's last events and the access record all show it."""
        usage = source.usage_so_far()
        if usage is None or usage == known or any(type(e) is Usage for e in events):
            return events
        return events[:-1] + [usage, events[-1]]

    async def shutdown(self, grace: float = 2.0) -> None:
        """End every local generation in-dialect (followers see why) and give them ``grace``
        seconds to write it, so their logs finish and their usage is recorded."""
        why = StreamError("overloaded", "the gateway is shutting down; retry the request", 503)
        for run in list(self.runs.values()):
            run.request_stop(why)
        tasks = list(self.tasks.values())
        if tasks:
            await asyncio.wait(tasks, timeout=grace)
        for task in tasks:
            task.cancel()

    # ------------------------------------------------------------------ caller side

    async def delivered_all(self, sid: str, written: list[int]) -> bool:
        """The log of ``sid`` is finished and its last event is the last one written to a caller."""
        status = await self.store.log_status(sid)
        return status is not None and status.finished and bool(written) and written[-1] == status.count - 1

    async def follow(
        self,
        dialect: str,
        codec: Codec,
        req: ChatRequest,
        sid: str,
        after: int | None,
        send: Send,
        headers: list[tuple[bytes, bytes]],
        delivered: Callable[[], None] | None = None,
        written: list[int] | None = None,
    ) -> None:
        """Stream the log of ``sid`` after event ``after`` (all of it for None), then its live tail.
        ``delivered`` is called once the log's last event was written to the caller (an SDK may
        hang up right after it, before this returns). ``written`` gets the sequence number of each
        frame written, so a caller cancelled while the log's end was still unconfirmed can tell
        (``delivered_all``) whether it had in fact got every event."""
        ctx = EncodeContext(model=req.model, upstream_dialect=dialect, request=req, response_id=sid)
        encoder = codec.stream_encoder(ctx)
        await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS + headers})
        writer = StreamWriter(send, encoder.keepalive(), self.settings.server.keepalive_seconds, 0)
        try:
            async for seq, frame in self.store.follow(
                sid, after, dead_after=self.owner_timeout, owner_alive=lambda: self.runs_here(sid)
            ):
                await writer.write(frame)
                if written is not None:
                    written.append(seq)
            if delivered is not None:
                delivered()
        except OwnerGone:
            err = StreamError(
                "bad_gateway", "the gateway replica running this generation stopped; start a new request", 502
            )
            await writer.write(encoder.encode(err))
        finally:
            writer.stop()
        await writer.write(b"", more=False)

    def runs_here(self, sid: str) -> bool:
        """Whether this process runs the generation of ``sid`` now. Its liveness needs no
        heartbeat: a follower here never gives up on a generation that is still running here."""
        task = self.tasks.get(sid)
        return task is not None and not task.done()

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
            return GatewayError(
                stream_error.kind,
                stream_error.message,
                stream_error.status,
                raw=stream_error.raw,
                origin=self.origins.pop(sid, None),
            )
        error = obj.get("error") or (obj.get("errors") or [{}])[0]
        message = error.get("message") if isinstance(error, dict) else None
        return GatewayError("bad_gateway", message or "the generation failed", 502)

    async def stored_object(self, dialect: str, sid: str, *, timeline: bool = False) -> dict[str, Any] | None:
        """The stored object of ``sid``, unchecked: for the request that created it. A caller
        naming an id goes through ``owned_object``."""
        stored = await self.store.get(policy(dialect).kind, sid)
        if stored is None:
            return None
        obj = dict(stored["object"])
        return policy(dialect).timeline(obj, stored) if timeline else obj

    async def owned(self, dialect: str, sid: str, key_name: str | None) -> dict[str, Any] | None:
        """The stored record of ``sid`` if it exists and is ``key_name``'s; None otherwise (the
        caller cannot tell which: it gets the not-found answer either way)."""
        stored = await self.store.get(policy(dialect).kind, sid)
        if stored is None or not owns(stored, key_name):
            return None
        return stored

    async def owned_object(
        self, dialect: str, sid: str, key_name: str | None, *, timeline: bool = False
    ) -> dict[str, Any] | None:
        """What ``GET …/{id}`` answers ``key_name``: its own stored object, or None."""
        stored = await self.owned(dialect, sid, key_name)
        if stored is None:
            return None
        obj = dict(stored["object"])
        return policy(dialect).timeline(obj, stored) if timeline else obj

    async def input_items(self, dialect: str, sid: str, key_name: str | None) -> dict[str, Any] | None:
        """A stored turn's input, listed as ``GET …/{id}/input_items`` answers (newest first)."""
        stored = await self.owned(dialect, sid, key_name)
        if stored is None:
            return None
        data = list(reversed(stored.get("input_items") or []))  # the API lists newest first by default
        return {
            "object": "list",
            "data": data,
            "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None,
            "has_more": False,
        }

    async def cancel(self, dialect: str, sid: str, key_name: str | None) -> dict[str, Any] | None:
        if await self.owned(dialect, sid, key_name) is None:
            return None  # another key's generation goes on untouched
        status = await self.store.log_status(sid)
        if status is not None and not status.finished:
            await self.store.request_cancel(sid)  # the owner, on whichever replica, hears it within a heartbeat
            run = self.runs.get(sid)
            if run is not None:
                run.request_stop(cancelled_on_request())  # ours: no need to wait for the heartbeat
            await self.wait(sid, 5.0)
        return await self.owned_object(dialect, sid, key_name)

    async def delete(self, dialect: str, sid: str, key_name: str | None) -> bool:
        if await self.owned(dialect, sid, key_name) is None:
            return False  # unknown, expired or another key's: nothing stopped, nothing removed
        run, task = self.runs.get(sid), self.tasks.get(sid)
        if run is not None and task is not None:
            await self.store.request_cancel(sid)
            run.request_stop(cancelled_on_request())
            await asyncio.wait({task}, timeout=2.0)
        return await self.store.delete(policy(dialect).kind, sid)
