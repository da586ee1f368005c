"""The pipeline for one model request, from the caller's bytes to the caller's bytes.

parse (caller codec) → route → open upstream (attempts.py: retries, fallbacks) → relay events:
streamed through the caller's ``StreamEncoder`` with keepalives and an idle timeout, or folded
into a ``Reply`` for a whole answer. The caller hanging up cancels everything at once
(``asgi.run_until_disconnect``), which closes the upstream connection in ``finally`` blocks.
"""

from __future__ import annotations

import asyncio
import logging
import math
from typing import TYPE_CHECKING, Any

from gateway.asgi import (
    ClientGone,
    Receive,
    Scope,
    Send,
    parse_json_object,
    read_body,
    run_until_disconnect,
    send_json,
)
from gateway.dialects.base import Codec, EncodeContext, RequestMeta
from gateway.dialects.items import unshown
from gateway.dialects.registry import codec_for
from gateway.dialects.validation import validate_request
from gateway.errors import GatewayError
from gateway.events import BlockStart, End, Event, StreamError, Usage
from gateway.ir import ChatRequest, Message
from gateway.relay.attempts import AttemptsFailed, Opened, batches, open_upstream
from gateway.relay.exchange import Attempt, Exchange, Headers
from gateway.relay.fast_path import FramePassthrough
from gateway.relay.stateful import Stateful, new_stored_id
from gateway.relay.stream_writer import StreamWriter
from gateway.relay.turn_memory import TURN_MEMORY, TurnMemory
from gateway.reply import ReplyBuilder
from gateway.routing.affinity import session_header
from gateway.telemetry.inspector import CURRENT
from gateway.telemetry.observe import AccessRecord, request_id_for
from gateway.upstream.source import HttpEventSource

if TYPE_CHECKING:
    from gateway.relay.state import GatewayState
    from gateway.telemetry.observe import Observer
    from gateway.telemetry.recent import Recent

log = logging.getLogger("gateway.relay")

SSE_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]
JSON_ARRAY_STREAM_HEADERS = [  # Gemini streamGenerateContent without alt=sse
    (b"content-type", b"application/json; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


_TRACKED = (Usage, End, StreamError)  # the events the access log reads while streaming


def _note_usage(record: AccessRecord, event: Event) -> None:
    if isinstance(event, Usage):
        record.add_usage(event)
    elif isinstance(event, End):
        record.stop_reason, record.raw_stop_reason = event.reason, event.raw_reason
    elif isinstance(event, StreamError):
        record.error_kind = event.kind


class Relay:
    def __init__(self, state: GatewayState) -> None:
        self.state = state

    async def serve(self, dialect: str, scope: Scope, receive: Receive, send: Send, meta: RequestMeta) -> None:
        state = self.state
        request_id = request_id_for(scope)
        extra_headers = [(b"x-request-id", request_id.encode())]
        record = AccessRecord(request_id, dialect, scope["path"])
        memory = scope.get(TURN_MEMORY)  # a turn on a Responses WebSocket (gateway/server/websocket.py)
        if memory is not None:
            record.transport = "websocket"
        shared: SharedRecord | None = None  # a detached generation shares the record (see _detached)
        codec = codec_for(dialect)
        capture = None
        if state.inspector.on:  # the only cost of the inspector when capture is off
            capture = state.inspector.begin(request_id, dialect, scope["path"])
            if capture is not None:
                send = capture.wrap_send(send)
                capture_token = CURRENT.set(capture)
        telemetry = state.telemetry  # None: tracing off, and nothing below makes a span
        trace = telemetry.start(scope, meta.headers, dialect, record) if telemetry is not None else None
        ex = Exchange(codec, record, send, extra_headers, trace)
        try:
            try:
                spec = await state.auth.authenticate(scope, meta.query)
                if spec is not None:
                    record.key = spec.name  # early: spans and logs name the key from here on
                body = await read_body(scope, receive, state.settings.server.max_body_bytes)
                if capture is not None:
                    capture.caller_request(scope, meta.query, body)
                obj = parse_json_object(scope, body, state.settings.server.max_json_depth)
                validate_request(dialect, obj, meta)  # the caller's own API's rules, before anything else
                req = codec.parse_request(obj, meta)
                req.dialect = dialect
                req.session = session_header(meta.headers)  # affinity.py: x-session-id, Claude Code's, Codex's
                if meta.stream is not None:
                    req.stream = meta.stream
                self._check_limits(req)
                ex.req = req
                resolved = ex.resolved = state.router.resolve(req.model)
                if state.guardrails is not None:  # before the span and the upstream see the request
                    guard = ex.guard = state.guardrails.for_request(resolved.route, record.key)
                    if guard is not None:
                        record.guardrails = guard.acted
                        await guard.check_request_async(req)
                if trace is not None:
                    trace.request(req, resolved)
                if (
                    req.stream
                    and not req.include_usage
                    and (resolved.stream_usage or state.settings.server.stream_usage) == "always"
                ):
                    req.include_usage = True  # stream_usage = "always": the stream ends with its usage (OpenAI chat)
                if spec is not None:
                    await state.limiter.admit(spec, req, resolved, record, dialect, extra_headers)
                stateful = state.stateful
                if stateful is not None and stateful.handles(dialect):
                    turn = await stateful.prepare(req, dialect, spec, memory)
                    if stateful.detaches(req, dialect):
                        record.model, record.stream, record.route = req.model, req.stream, resolved.route
                        shared = SharedRecord(state.observer, record, state.console)
                        await self._detached(ex, turn, receive, shared)
                        return
                    if stateful.persists(req, dialect):
                        ex.persist = Persist(stateful, dialect, codec, turn)
                    elif memory is not None:  # store: false, kept by the connection to chain on
                        ex.persist = Persist(stateful, dialect, codec, turn, memory)
                elif req.previous_id or req.background:
                    raise GatewayError(
                        "invalid_request",
                        "this gateway runs without a store: send the full history, without background",
                        400,
                    )
            except ClientGone:
                record.status, record.error_kind = 499, "client_gone"
                return
            except GatewayError as err:
                await self._send_error(ex, err, extra_headers)
                return
            record.model, record.stream, record.route = req.model, req.stream, resolved.route
            if state.cache is not None:  # the response cache (cache.py): off unless [cache] enabled
                ex.cache = state.cache.ticket(req, resolved, spec.name if spec is not None else None, meta.headers)
            work = self._relay(ex)
            finished = await run_until_disconnect(work, receive)
            if not finished and not record.response_done:  # cut short, not merely cancelled while draining the upstream
                record.status, record.error_kind = 499, record.error_kind or "client_gone"
        except Exception as exc:  # a bug or a store outage: still an answer in the caller's dialect
            log.exception("request %s failed inside the gateway", request_id)
            if not record.response_started:
                failure = GatewayError(
                    "api_error", f"internal gateway error ({type(exc).__name__}); the request id is {request_id}", 500
                )
                await self._send_error(ex, failure, extra_headers)
        finally:
            if shared is None:
                state.observer.finish(record)
                if state.console is not None:  # (a detached generation's: by SharedRecord when it ends)
                    state.console.note(record)
            else:
                shared.release()
            if capture is not None:
                CURRENT.reset(capture_token)
                # a guarded request's wire (raw values) is never kept, nor one refused before its
                # guardrails were known (a malformed body, an unknown model) when any are configured
                unguarded = ex.guard is None and (state.guardrails is None or getattr(ex, "resolved", None) is not None)
                if unguarded:
                    state.inspector.end(capture, record)
            if trace is not None:
                trace.finish(record)

    def _check_limits(self, req: ChatRequest) -> None:
        limit = self.state.settings.server.max_tokens_limit
        if req.max_tokens is not None and (req.max_tokens < 1 or req.max_tokens > limit):
            raise GatewayError(
                "invalid_request",
                f"max_tokens must be between 1 and {limit}, got {req.max_tokens}",
                400,
                param="max_tokens",
            )

    async def _send_error(self, ex: Exchange, err: GatewayError, headers: Headers | None = None) -> None:
        """``err`` in the caller's dialect; ``headers``: instead of the exchange's (the ones
        before the upstream answered, for a failure outside the relay's stages)."""
        record = ex.record
        headers = ex.headers if headers is None else headers
        status, body = ex.codec.render_error(err)
        record.status, record.error_kind = status, err.kind
        record.first_byte()
        record.response_started = True
        if (
            err.retry_after is not None
            and status in (429, 503, 529)
            and not any(name == b"retry-after" for name, _ in headers)
        ):
            # when to come back (every target cooling, a key's limit); once, whoever set it first
            headers = [*headers, (b"retry-after", str(max(1, math.ceil(err.retry_after))).encode())]
        await send_json(ex.send, status, body, headers)

    async def _detached(self, ex: Exchange, turn: list[Message], receive: Receive, shared: SharedRecord) -> None:
        """A stored interaction / background response: the generation outlives this connection.

        Its usage, stop reason and error go into the access record of THIS request (the one that
        started it), filled by the generation's own events; the record is written once, when
        both this request and the generation are done (see ``SharedRecord``). A resume, a replay
        or a GET of the stored object reads the event log and never carries the usage again."""
        codec, req, resolved, trace, send = ex.codec, ex.req, ex.resolved, ex.trace, ex.send
        record = shared.record
        stateful = self.state.stateful
        assert stateful is not None
        dialect = codec.name
        refused = codec.stored.detach_problem(req) if codec.stored is not None else None
        if refused is not None:  # the dialect's own rule (Responses: background must be stored)
            raise refused
        try:
            # errors: an HTTP status, nothing stored
            opened = await open_upstream(
                self.state.providers,
                req,
                resolved,
                stream_upstream=True,
                attempts=ex.attempts,
                trace=trace,
                routing=self.state.routing,
            )
        except BaseException:
            self._note_failed_attempts(record, ex.attempts)
            raise
        record.attempts = [_attempt_dict(a) for a in opened.attempts]
        record.provider, record.upstream_dialect, record.upstream_model = (
            opened.provider.name,
            opened.provider.dialect,
            opened.target.upstream_model,
        )
        headers = _note_dropped(
            record, opened, ex.headers
        )  # (not the exchange's: an error from here on is sent without them)
        record.first_byte()
        if trace is not None:
            trace.detached = True  # the attempt span ends with this request; the task's usage is not on it
        if ex.guard is not None and ex.guard.on_response:
            opened.filter = ex.guard.filter_async  # the stored events and every follower see the guarded answer
        sid = await stateful.start_detached(dialect, codec, req, opened, turn, shared)
        await self.state.routing.chain(req, resolved, opened.target, sid)
        if req.stream:
            record.response_started = True  # follow() starts the SSE response
            got_end: list[bool] = []
            written: list[int] = []
            await run_until_disconnect(
                stateful.follow(dialect, codec, req, sid, None, send, headers, lambda: got_end.append(True), written),
                receive,
            )
            # an SDK hangs up right after the last frame, maybe before follow() saw the log close
            if not got_end and not await stateful.delivered_all(sid, written):
                record.status = 499  # the caller left before the end; the generation goes on and keeps its own outcome
            return
        if not req.background and not await run_until_disconnect(stateful.wait(sid, stateful.max_seconds), receive):
            record.status = 499
            return
        obj = await stateful.stored_object(dialect, sid)
        if obj is not None and obj.get("status") == "failed" and not req.background:
            raise stateful.failure(dialect, sid, obj)
        await send_json(send, 200, obj, headers)

    async def _relay(self, ex: Exchange) -> None:
        codec, req, record, ticket = ex.codec, ex.req, ex.record, ex.cache
        cache = self.state.cache
        try:
            # a hit: the stored answer, opened as if an upstream had answered it (cache.py)
            hit = (
                None
                if ticket is None or cache is None
                else await cache.replay(ticket, self.state.providers, record, ex.headers)
            )
            fast = (
                codec.name
                if req.stream
                and self.state.fast_path
                and ex.persist is None
                and not req.previous_id  # resolved here: the upstream's frames cannot echo it
                and req.stream_framing == "sse"
                and (ex.guard is None or not ex.guard.on_response)  # redacted events are re-encoded
                else None
            )
            opened = hit or await open_upstream(
                self.state.providers,
                req,
                ex.resolved,
                fast,
                attempts=ex.attempts,
                trace=ex.trace,
                routing=self.state.routing,
            )
        except AttemptsFailed as err:
            self._note_failed_attempts(record, err.attempts)
            await self._send_error(ex, err)
            return
        except BaseException:  # the caller hung up while the upstream was being opened
            self._note_failed_attempts(record, ex.attempts)
            raise
        record.attempts = [_attempt_dict(a) for a in opened.attempts]
        record.provider, record.upstream_dialect, record.upstream_model = (
            opened.provider.name,
            opened.provider.dialect,
            opened.target.upstream_model,
        )
        ex.headers = _note_dropped(record, opened, ex.headers)
        ctx = EncodeContext(model=req.model, upstream_dialect=opened.provider.dialect, request=req)
        if ex.persist is not None:
            ctx.response_id = new_stored_id(codec.name)
            await self.state.routing.chain(req, ex.resolved, opened.target, ctx.response_id)
        try:
            if req.stream:
                await self._stream(ex, ctx, opened)
            else:
                await self._whole(ex, ctx, opened)
            record.response_done = True  # the caller has it all: uvicorn reports a disconnect from here on
        finally:
            # However it ended (the end, a cut, an idle timeout, the caller leaving): what the
            # upstream had reported so far, including usage a dialect holds back until its end.
            record.add_usage(opened.source.usage_so_far())
            await opened.close(Usage(record.input_tokens, record.output_tokens))

    async def _keep(self, ex: Exchange) -> None:
        """The response cache keeps the answer just relayed, if it qualifies (cache.py)."""
        if ex.cache is not None and self.state.cache is not None:
            await self.state.cache.keep(ex.cache, ex.record)

    def _note_failed_attempts(self, record: AccessRecord, attempts: list[Attempt]) -> None:
        """No attempt answered: log each one, and keep the usage of the last that reported any
        (an upstream that accepted the call and then refused it in-stream, or was cut before any
        content), naming that upstream so the tokens are attributed where they were spent."""
        record.attempts = [_attempt_dict(a) for a in attempts]
        spent = next((a for a in reversed(attempts) if a.usage is not None), None)
        if spent is not None:
            record.add_usage(spent.usage)
            provider = self.state.providers.get(spent.provider)
            record.provider, record.upstream_model = spent.provider, spent.upstream_model
            record.upstream_dialect = provider.dialect if provider is not None else None

    async def _stream(self, ex: Exchange, ctx: EncodeContext, opened: Opened) -> None:
        """The answer as the caller's stream. With telemetry's capture_content, ``trace.output``
        folds it for the span's output messages."""
        state = self.state
        codec, send, record, persist = ex.codec, ex.send, ex.record, ex.persist
        captured = ex.trace.output if ex.trace is not None else None
        kept = ex.cache.events if ex.cache is not None and ex.cache.store else None  # for the response cache
        encoder = codec.stream_encoder(ctx)
        source = opened.source
        idle = opened.provider.settings.idle_timeout
        metrics = state.observer.metrics
        metrics.active_streams.inc()
        record.response_started = True
        framing = SSE_HEADERS if ctx.request.stream_framing == "sse" else JSON_ARRAY_STREAM_HEADERS
        await send({"type": "http.response.start", "status": 200, "headers": framing + ex.headers})
        passthrough = None
        frames: HttpEventSource | None = None  # the source, when its frames pass through as they came
        if isinstance(source, HttpEventSource) and source.keep_frames:
            frames = source
            passthrough = FramePassthrough(codec.name, ctx.model, ctx.request.include_usage, encoder)
        writer = StreamWriter(send, encoder.keepalive(), state.settings.server.keepalive_seconds, idle)
        task = asyncio.current_task()  # (None only outside a task: then nothing to end at shutdown)
        if task is not None:
            state.live_streams.add(task)

        async def end_with(err: StreamError) -> None:
            """The gateway ends the stream itself: the error in the caller's dialect, then the end."""
            _note_usage(record, err)
            await writer.write(encoder.encode(err) if passthrough is None else passthrough.error_tail(err))
            await writer.write(b"", more=False)

        guard = ex.guard if ex.guard is not None and ex.guard.on_response else None
        try:
            batch = opened.first
            loop = asyncio.get_running_loop()
            encode = encoder.encode
            while True:
                if guard is not None:  # (a webhook on the answer: awaited)
                    batch = guard.filter(batch) if guard.synchronous else await guard.filter_async(batch)
                if passthrough is None or frames is None:
                    out = b"".join([encode(e) for e in batch])
                else:
                    out = passthrough.render(frames.take_frames())
                    last = batch[-1] if batch else None
                    if type(last) is StreamError and frames.synthetic:
                        out += passthrough.error_tail(last)
                finished = False
                for event in batch:
                    if type(event) in _TRACKED:
                        _note_usage(record, event)
                        finished = finished or type(event) is not Usage
                if captured is not None:
                    captured.extend(batch)
                if kept is not None:
                    kept.extend(batch)
                    if finished:  # kept before the caller sees the end, so an immediate repeat finds it
                        await self._keep(ex)
                if persist is not None:
                    persist.builder.extend(batch)
                    if finished:  # stored before the caller sees the end, so a follow-up finds it
                        await persist.done(ctx)
                if out:
                    record.first_byte()
                    await writer.write(out)
                if finished:
                    break
                if source.done:  # defensive: a source must end with End/StreamError
                    tail = StreamError("truncated", "upstream stream ended without its terminator", 502)
                    await writer.write(encode(tail) if passthrough is None else passthrough.error_tail(tail))
                    break
                # The idle watchdog (in StreamWriter) covers the upstream read only, never a slow caller.
                writer.waiting = True
                batch = await source.next_batch()
                writer.waiting = False
                writer.upstream_at = loop.time()
            await writer.write(b"", more=False)
        except Exception:
            # a bug mid-stream: the caller still gets an in-dialect error, never a silent cut
            log.exception("stream failed inside the gateway")
            await end_with(StreamError("api_error", "internal gateway error mid-stream", 500))
        except asyncio.CancelledError:
            if task is None or not (writer.idle_expired or state.shutting_down):
                raise
            # Not the caller leaving: the upstream went silent, or shutdown's grace ran out.
            # End the stream in the caller's dialect instead of cutting it.
            task.uncancel()
            if writer.idle_expired:
                err = StreamError("timeout", f"upstream sent nothing for {idle:g}s", 504)
            else:
                err = StreamError("overloaded", "the gateway is shutting down; retry the request", 503)
            await end_with(err)
        finally:
            writer.stop()
            if task is not None:
                state.live_streams.discard(task)
            metrics.active_streams.dec()
            _note_output_dropped(record, ctx, [])
        if record.error_kind:
            record.status = 200  # the HTTP status was 200; the failure is in error_kind

    async def _whole(self, ex: Exchange, ctx: EncodeContext, opened: Opened) -> None:
        codec, record, persist, trace = ex.codec, ex.record, ex.persist, ex.trace
        builder = persist.builder if persist is not None else ReplyBuilder()
        kept = ex.cache.events if ex.cache is not None and ex.cache.store else None  # for the response cache
        if ex.guard is not None and ex.guard.on_response:
            opened.filter = ex.guard.filter_async  # redacted before the reply, and before the cache keeps it
        async for batch in batches(opened):
            if kept is not None:
                kept.extend(batch)
            for event in batch:
                builder.add(event)
                _note_usage(record, event)
        reply = builder.reply
        if trace is not None and trace.content is not None:
            trace.reply = reply  # capture_content: the span's output messages
        if reply.error is not None:
            e = reply.error
            err = GatewayError(e.kind, e.message, e.status, raw=e.raw, origin=ctx.upstream_dialect)
            await self._send_error(ex, err)
            return
        body = codec.encode_whole(reply, ctx)
        ex.headers = _note_output_dropped(record, ctx, ex.headers)
        if kept is not None:
            await self._keep(ex)  # kept before the caller sees it, so an immediate repeat finds it
        if persist is not None:
            await persist.done(ctx)  # stored before the caller sees it, so a follow-up finds it
        record.first_byte()
        record.response_started = True
        await send_json(ex.send, 200, body, ex.headers)


class SharedRecord:
    """The access record of a request that started a detached generation, held by both.

    The generation's events fill it (``events``), the request sets what its caller got (status,
    time to first byte); whoever lets go last finishes it, so ``Observer.finish`` sees it exactly
    once and with the generation's final usage — for a background response, when the generation
    ends, long after its POST was answered. The one record per generation a spend ledger settles.
    """

    __slots__ = ("observer", "record", "holders", "console")

    def __init__(self, observer: Observer, record: AccessRecord, console: Recent | None = None) -> None:
        self.observer, self.record, self.holders = observer, record, 1
        self.console = console  # the web console's ring (gateway.telemetry.recent.Recent), when [admin] is set

    def events(self, batch: list[Event]) -> None:
        record = self.record
        for event in batch:
            if type(event) in _TRACKED:
                _note_usage(record, event)
            elif type(event) is BlockStart:  # read by each follower: what none of them is shown
                name = unshown(event, record.dialect)
                if name is not None and name not in record.dropped:
                    record.dropped = [*record.dropped, name]

    def hold(self) -> None:
        self.holders += 1

    def release(self) -> None:
        self.holders -= 1
        if self.holders == 0:
            self.observer.finish(self.record)
            if self.console is not None:  # the console's Requests/Overview see it once, finished
                self.console.note(self.record)


class Persist:
    """Keeps a stored (not detached) Responses answer: folds its events, stores it at the end."""

    def __init__(
        self, stateful: Stateful, dialect: str, codec: Codec, turn: list[Message], memory: TurnMemory | None = None
    ) -> None:
        self.stateful, self.dialect, self.codec, self.turn = stateful, dialect, codec, turn
        self.memory = memory  # a store: false turn on a WebSocket: kept by its connection only
        self.builder = ReplyBuilder()

    async def done(self, ctx: EncodeContext) -> None:
        reply = self.builder.reply
        if reply.error is None and reply.end is not None:
            await self.stateful.persist(self.dialect, self.codec, ctx, reply, self.turn, self.memory)


def _note_dropped(record: AccessRecord, opened: Opened, headers: Headers) -> Headers:
    """Settings the upstream was sent without (gateway/dialects/carry.py): in the log line and a response header."""
    if not opened.dropped:
        return headers
    record.dropped = list(opened.dropped)
    return [*headers, (b"x-gateway-dropped", ", ".join(opened.dropped).encode())]


def _note_output_dropped(record: AccessRecord, ctx: EncodeContext, headers: Headers) -> Headers:
    """Output items the caller's dialect cannot express (gateway/dialects/items.py): in the log
    line, and in ``x-gateway-dropped`` where the headers are still to be sent (a whole answer)."""
    new = [name for name in ctx.dropped if name not in record.dropped]
    if not new:
        return headers
    record.dropped = [*record.dropped, *new]
    kept = [(k, v) for k, v in headers if k != b"x-gateway-dropped"]
    return [*kept, (b"x-gateway-dropped", ", ".join(record.dropped).encode())]


def _attempt_dict(attempt: Attempt) -> dict[str, Any]:
    line: dict[str, Any] = {
        "provider": attempt.provider,
        "upstream_model": attempt.upstream_model,
        "status": attempt.status,
        "error": attempt.error,
        "ms": round(attempt.ms, 2),
    }
    u = attempt.usage
    if u is not None:  # a failed attempt whose upstream had already reported usage
        line["usage"] = {
            "input_tokens": u.input,
            "output_tokens": u.output,
            "cache_read_tokens": u.cache_read,
            "cache_write_tokens": u.cache_write,
            "reasoning_tokens": u.reasoning,
        }
    return line
