"""The pipeline of one embeddings request, from the caller's bytes to the caller's bytes.

parse (the caller's wire, gateway/dialects/<d>/embeddings.py) → route (the same ``[[routes]]`` as
chat) → the key's limits (tpm: the input estimate, no output) → for each target in turn: its
wire (``dialects.embeddings.wire_for``), the inputs cut into parts of the wire's per-call limit,
the parts sent concurrently (at most ``PARTS_IN_FLIGHT`` at once), reassembled in input order →
the caller's answer. One mechanism for every caller × upstream pair, no pair translators.

Failures, as for chat (gateway/relay/attempts.py): a 429, 5xx, timeout or unreachable upstream is
retried with jittered backoff (``max_retries``, ``Retry-After`` honoured) — only the parts not yet
answered are sent again — then the route's next target (a fallback, or another of a pool's
targets, with cooldowns and rpm/tpm as routing.py keeps them) embeds the whole request again,
since vectors of different models must never be mixed. A part that finally fails fails the
request with that part's error in the caller's dialect; no partial answer is ever sent. Anything
the request asks that a target cannot carry (token arrays to a text-only API, ``dimensions`` for a
fixed-size model or above the model's size) is refused before anything is sent to it.

The access log line is ``"kind": "embeddings"`` with the input tokens the upstream reported, or,
where it reports none (the Gemini API), the gateway's estimate with ``usage_estimated: true``;
the ledger prices it like chat (input tokens only).
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson

from gateway.asgi import ClientGone, Receive, Scope, Send, header, parse_json_object, read_body, run_until_disconnect
from gateway.dialects.base import RequestMeta
from gateway.dialects.embedding_wires import wire_for
from gateway.dialects.embeddings import Answer, EmbedPart, EmbedRequest, EmbedResult, EmbedWire, Vector
from gateway.dialects.registry import codec_for
from gateway.errors import GatewayError
from gateway.events import Usage
from gateway.http import client as http_client
from gateway.ir import ChatRequest
from gateway.relay.attempts import RETRYABLE, send_upstream, upstream_error
from gateway.routing.router import Resolved, Target
from gateway.telemetry.observe import AccessRecord, request_id_for
from gateway.token_estimate import estimate_text_tokens

if TYPE_CHECKING:
    from gateway.guardrails.engine import RequestGuard
    from gateway.relay.state import GatewayState
    from gateway.telemetry.inspector import Capture
    from gateway.telemetry.traces import RequestTrace
    from gateway.upstream.providers import Provider

log = logging.getLogger("gateway.embeddings")

PARTS_IN_FLIGHT = 8  # concurrent upstream calls of one request (a 1,000-input Titan request: 8 at a time)
MAX_ANSWER_BYTES = 512 << 20  # 2,048 × 3,072 floats as JSON is ~130 MB; more is not an embeddings answer

Parse = Callable[[dict[str, Any]], EmbedRequest]
Encode = Callable[[EmbedResult, EmbedRequest], bytes]
Headers = list[tuple[bytes, bytes]]


def estimate_input_tokens(req: EmbedRequest) -> int:
    """Token ids count themselves; text is the gateway's estimate (gateway/token_estimate.py)."""
    if req.tokens:
        return sum(len(t) for t in req.inputs)
    return estimate_text_tokens(req.inputs)  # type: ignore[arg-type]


def cannot_carry(req: EmbedRequest, wire: EmbedWire | None, provider: Provider, model: str) -> GatewayError | None:
    """Why ``provider`` cannot embed ``req`` with ``model`` (nothing is sent to it), or None."""
    if wire is None:
        where = f"platform {provider.settings.platform}" if provider.settings.platform else "its API"
        return GatewayError(
            "invalid_request",
            f"provider {provider.name!r} ({provider.dialect} on {where}) has no embeddings API for model {model!r}",
            400,
            param="model",
        )
    if req.tokens and not wire.takes_tokens:
        return GatewayError(
            "invalid_request",
            f"input: the upstream of {req.model!r} ({wire.name}) embeds text only, not token arrays: send strings",
            400,
            param="input",
        )
    if req.dimensions is not None:
        if not wire.supports_dimensions(model):
            return GatewayError(
                "invalid_request",
                f"dimensions: model {model!r} has a fixed output size; leave dimensions out",
                400,
                param="dimensions",
            )
        largest = wire.max_dimensions(model)
        if largest is not None and req.dimensions > largest:
            return GatewayError(
                "invalid_request",
                f"dimensions: model {model!r} has at most {largest}, got {req.dimensions}",
                400,
                param="dimensions",
            )
    return None


def parts_of(req: EmbedRequest, size: int) -> list[EmbedPart]:
    inputs, titles = req.inputs, req.titles
    if len(inputs) <= size:
        return [EmbedPart(inputs, titles, 0)]
    return [
        EmbedPart(inputs[i : i + size], titles[i : i + size] if titles else None, i)
        for i in range(0, len(inputs), size)
    ]


class EmbedRelay:
    def __init__(self, state: GatewayState) -> None:
        self.state = state

    async def serve(
        self, dialect: str, scope: Scope, receive: Receive, send: Send, meta: RequestMeta, parse: Parse, encode: Encode
    ) -> None:
        state = self.state
        request_id = request_id_for(scope)
        headers: Headers = [(b"x-request-id", request_id.encode())]
        record = AccessRecord(request_id, dialect, scope["path"])
        record.kind, record.stream = "embeddings", False
        telemetry = state.telemetry
        trace = telemetry.start(scope, meta.headers, dialect, record) if telemetry is not None else None
        capture = state.inspector.begin(request_id, dialect, scope["path"]) if state.inspector.on else None
        if capture is not None:  # the console's inspector: the caller's side, and a one-part request's upstream call
            send = capture.wrap_send(send)
        unguarded = state.guardrails is None  # (known once the route is: then kept unless guarded)
        try:
            try:
                spec = await state.auth.authenticate(scope, meta.query)
                if spec is not None:
                    record.key = spec.name
                body = await read_body(scope, receive, state.settings.server.max_body_bytes)
                if capture is not None:
                    capture.caller_request(scope, meta.query, body)
                req = parse(parse_json_object(scope, body, state.settings.server.max_json_depth))
                req.dialect = dialect
                record.model = req.model
                resolved = state.router.resolve(req.model)
                record.route = resolved.route
                if req.task_type is None:
                    req.task_type = resolved.task_type  # the route's default (an OpenAI caller sends none)
                if state.guardrails is not None:  # before the estimate, the span and the upstream see the inputs
                    guard = state.guardrails.for_request(resolved.route, record.key)
                    unguarded = guard is None
                    if guard is not None:
                        record.guardrails = guard.acted
                        await guard_inputs(guard, req)
                if trace is not None:
                    attrs = trace.span.attributes
                    attrs["gateway.request.model"], attrs["gateway.route"] = req.model, resolved.route
                estimate = estimate_input_tokens(req)
                who = ChatRequest(model=req.model, user=req.user, session=header(scope, b"x-session-id"))
                if spec is not None:
                    await state.limiter.admit(
                        spec, who, resolved, record, dialect, headers, input_tokens=estimate, output_tokens=0
                    )
            except ClientGone:
                record.status, record.error_kind = 499, "client_gone"
                return
            except GatewayError as err:
                await self._send_error(send, dialect, record, err, headers)
                return
            run = _Run(state, req, resolved, record, trace, who, estimate, capture)

            async def work() -> None:
                try:
                    result = await run.embed()
                except GatewayError as err:
                    run.note_spent()  # parts an upstream answered before another failed: their tokens were spent
                    await self._send_error(send, dialect, record, err, headers)
                    return
                if result.input_tokens is None:
                    result.input_tokens, record.usage_estimated = estimate, True
                record.input_tokens = result.input_tokens
                payload = encode(result, req)
                record.first_byte()
                record.response_started = True
                await _send_bytes(send, 200, payload, headers)
                record.response_done = True

            if not await run_until_disconnect(work(), receive) and not record.response_done:
                record.status, record.error_kind = 499, record.error_kind or "client_gone"
        except Exception as exc:  # a bug: still an answer in the caller's dialect
            log.exception("embeddings request %s failed inside the gateway", request_id)
            if not record.response_started:
                failure = GatewayError(
                    "api_error", f"internal gateway error ({type(exc).__name__}); the request id is {request_id}", 500
                )
                await self._send_error(send, dialect, record, failure, headers)
        finally:
            state.observer.finish(record)
            if state.console is not None:
                state.console.note(record)
            if trace is not None:
                trace.finish(record)
            # a guarded request's wire (raw values) is never kept, nor one refused before its
            # guardrails were known, as for chat (gateway/relay/pipeline.py)
            if capture is not None and unguarded:
                state.inspector.end(capture, record)

    @staticmethod
    async def _send_error(send: Send, dialect: str, record: AccessRecord, err: GatewayError, headers: Headers) -> None:
        status, body = codec_for(dialect).render_error(err)
        record.status, record.error_kind = status, err.kind
        record.first_byte()
        record.response_started = True
        if (
            err.retry_after is not None
            and status in (429, 503, 529)
            and not any(name == b"retry-after" for name, _ in headers)
        ):
            headers = [*headers, (b"retry-after", str(max(1, math.ceil(err.retry_after))).encode())]
        await _send_bytes(send, status, orjson.dumps(body), headers)


async def guard_inputs(guard: RequestGuard, req: EmbedRequest) -> None:
    """The request's guardrails over its texts (inputs, then Gemini's titles): redacted in place, or
    the 400 ``guardrail_blocked`` before anything is sent upstream."""
    if req.tokens:
        refused = guard.refuse_tokens()
        if refused is not None:
            raise refused
        return
    inputs: list[str] = req.inputs  # type: ignore[assignment]
    titles = [t for t in req.titles or () if t is not None]
    checked = await guard.check_inputs([*inputs, *titles])
    req.inputs = checked[: len(inputs)]
    if titles:
        rest = iter(checked[len(inputs) :])
        req.titles = [None if t is None else next(rest) for t in req.titles or ()]


async def _send_bytes(send: Send, status: int, payload: bytes, headers: Headers) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})


class _Run:
    """One request's way through its route's targets."""

    def __init__(
        self,
        state: GatewayState,
        req: EmbedRequest,
        resolved: Resolved,
        record: AccessRecord,
        trace: RequestTrace | None,
        who: ChatRequest,
        estimate: int,
        capture: Capture | None = None,
    ) -> None:
        self.state, self.req, self.resolved, self.record, self.trace = state, req, resolved, record, trace
        self.who, self.estimate = who, estimate
        self.capture = capture  # (None when the inspector is off or skips this request)
        self.parts = 1  # of the target being tried: only a one-part call is captured (parts run concurrently)
        self.refused: GatewayError | None = None  # the first target that could not carry the request
        self.last: GatewayError | None = None  # the last upstream failure
        # (provider, dialect, model, tokens) of the answered parts of a target that then failed
        self.spent: tuple[str, str, str, int] | None = None
        self.spent_estimated = False

    async def embed(self) -> EmbedResult:
        resolved = self.resolved
        if resolved.balanced:
            found = await self._balanced()
            if found is not None:
                return found
            fallbacks = list(enumerate(resolved.targets[resolved.pool :], 1))
        else:
            fallbacks = list(enumerate(resolved.targets))
        for number, target in fallbacks:
            outcome = await self._target(target, number)
            if isinstance(outcome, EmbedResult):
                return outcome
        final = self.last or self.refused
        if final is None:
            final = GatewayError("rate_limit", f"every target of {resolved.route!r} is cooling down or at its limits")
        raise final

    async def _balanced(self) -> EmbedResult | None:
        """A pool, as attempts.py's ``_open_balanced`` for chat: each healthy target once in the
        strategy's order (routing.py), the last one with its provider's retries; a failure cools
        the target; when every target is cooling, wait for the first to recover if that falls
        within the first-byte budget. None: the fallbacks are next (``last`` says why)."""
        routing, resolved = self.state.routing, self.resolved
        budget = self.state.providers[resolved.targets[0].provider].settings.first_byte_timeout
        started = time.monotonic()
        tried: set[str] = set()
        while True:
            plan = await routing.plan(self.who, resolved, tried)
            for number, target in enumerate(plan.candidates):
                hold = await routing.admit(resolved, target, self.who, plan, tokens=self.estimate)
                if hold is False:
                    continue
                tried.add(target.key)
                await routing.started(resolved, target)
                tries = 1 if number + 1 < len(plan.candidates) else None
                began = time.perf_counter()
                try:
                    outcome = await self._target(target, 0, tries)
                except BaseException:
                    await routing.ended(resolved, target, None, hold)
                    raise
                if isinstance(outcome, EmbedResult):
                    await routing.served(resolved, target, plan, time.perf_counter() - began)
                    await routing.ended(resolved, target, Usage(input=outcome.input_tokens or self.estimate), hold)
                    return outcome
                await routing.ended(resolved, target, None, hold)
                if outcome is not None:  # (None: it cannot carry this request; it stays healthy)
                    await routing.failed(resolved, target, outcome.kind, outcome.retry_after)
            left = await routing.cooling(resolved.targets[: resolved.pool])
            recovery = min((s for s in left if s > 0), default=None)
            if recovery is not None and time.monotonic() - started + recovery <= budget:
                log.info(
                    "every target of %s is cooling: waiting %.2fs for the first to recover", resolved.route, recovery
                )
                await asyncio.sleep(recovery + 0.001)
                tried.clear()
                continue
            break
        last = self.last
        if last is None and self.refused is not None:
            return None  # no target can carry the request: the refusal is the answer
        wait = recovery if recovery is not None else plan.limited
        if wait is not None and (last is None or last.kind in ("rate_limit", "overloaded") or not tried):
            why = "cooling down after failures" if recovery is not None else "at its rpm/tpm limit"
            self.last = GatewayError(
                "rate_limit" if last is None or last.kind == "rate_limit" else "overloaded",
                f"every target of {resolved.route!r} is {why}; retry in {max(1, math.ceil(wait))}s",
                retry_after=wait,
            )
        return None

    async def _target(
        self, target: Target, fallback: int, tries: int | None = None
    ) -> EmbedResult | GatewayError | None:
        """One target with its provider's retries: the result, the last retryable error, or None
        when it cannot carry the request (nothing sent). A non-retryable error is raised."""
        req, record, trace = self.req, self.record, self.trace
        provider = self.state.providers[target.provider]
        model = target.upstream_model
        wire = wire_for(provider.settings, model)
        refusal = cannot_carry(req, wire, provider, model)
        if refusal is not None or wire is None:
            record.attempts.append(
                {"provider": provider.name, "upstream_model": model, "status": 400, "error": "cannot_carry", "ms": 0.0}
            )
            self.refused = self.refused or refusal
            return None
        settings = provider.settings
        tries = settings.max_retries + 1 if tries is None else tries
        parts = parts_of(req, wire.max_batch(model))
        self.parts = len(parts)
        results: list[EmbedResult | None] = [None] * len(parts)
        last: GatewayError | None = None
        for number in range(tries):
            started = time.perf_counter()
            attempt: dict[str, Any] = {"provider": provider.name, "upstream_model": model, "status": 200, "error": None}
            record.attempts.append(attempt)
            span = trace.embeddings_attempt(provider, target, fallback, req.dimensions) if trace is not None else None
            try:
                await self._parts(provider, wire, model, parts, results)
            except GatewayError as err:
                attempt["status"], attempt["error"] = err.status, err.kind
                attempt["ms"] = round((time.perf_counter() - started) * 1000, 2)
                if trace is not None and span is not None:
                    trace.attempt_failed(span, err)
                last = self.last = err
                if err.kind not in RETRYABLE:
                    self._keep_spent(provider, model, parts, results)
                    raise
                delay = settings.retry_backoff * (2**number) * (0.5 + random.random())
                if err.retry_after is not None:
                    if err.retry_after > settings.max_retry_after:
                        break
                    delay = max(delay, err.retry_after)
                if number + 1 < tries:
                    log.info("retrying %s embeddings after %s (%.2fs)", provider.name, err.kind, delay)
                    await asyncio.sleep(delay)
                continue
            except BaseException as exc:
                if trace is not None and span is not None:
                    trace.attempt_failed(
                        span, None, "cancelled" if isinstance(exc, asyncio.CancelledError) else type(exc).__name__
                    )
                raise
            attempt["ms"] = round((time.perf_counter() - started) * 1000, 2)
            if trace is not None and span is not None:
                trace.attempt_opened(span, [])
            record.provider, record.upstream_dialect, record.upstream_model = provider.name, provider.dialect, model
            return _assemble(results)
        self._keep_spent(provider, model, parts, results)
        return last

    def _keep_spent(
        self, provider: Provider, model: str, parts: list[EmbedPart], results: list[EmbedResult | None]
    ) -> None:
        tokens, estimated, any_done = 0, False, False
        for part, result in zip(parts, results):
            if result is None:
                continue
            any_done = True
            if result.input_tokens is not None:
                tokens += result.input_tokens
            else:
                tokens += estimate_input_tokens(EmbedRequest(self.req.model, part.inputs, self.req.tokens))
                estimated = True
        if any_done:
            self.spent = (provider.name, provider.dialect, model, tokens)
            self.spent_estimated = estimated
            if self.record.attempts:  # as a chat attempt that failed after its upstream reported usage
                self.record.attempts[-1]["usage"] = {
                    "input_tokens": tokens,
                    "output_tokens": None,
                    "cache_read_tokens": None,
                    "cache_write_tokens": None,
                    "reasoning_tokens": None,
                }

    def note_spent(self) -> None:
        """The request failed: the tokens its last failed target's answered parts used go on the
        record (and so into the ledger), attributed to that upstream — never a silent zero."""
        if self.spent is not None and self.record.input_tokens is None:
            record = self.record
            record.provider, record.upstream_dialect, record.upstream_model, record.input_tokens = self.spent
            record.usage_estimated = self.spent_estimated

    async def _parts(
        self, provider: Provider, wire: EmbedWire, model: str, parts: list[EmbedPart], results: list[EmbedResult | None]
    ) -> None:
        """Send the parts not answered yet, ``PARTS_IN_FLIGHT`` at a time; the first failure cancels
        the rest (what they had answered stays in ``results`` for the retry) and is raised."""
        pending = [i for i, r in enumerate(results) if r is None]
        if len(pending) == 1:  # the usual request: no task, no semaphore
            i = pending[0]
            results[i] = await self._call(provider, wire, model, parts[i])
            return
        gate = asyncio.Semaphore(PARTS_IN_FLIGHT)

        async def one(i: int) -> None:
            async with gate:
                results[i] = await self._call(provider, wire, model, parts[i])

        tasks = [asyncio.create_task(one(i)) for i in pending]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
            failed = next((t for t in tasks if t.done() and not t.cancelled() and t.exception() is not None), None)
            if failed is not None:
                exc = failed.exception()
                assert exc is not None
                raise exc
        finally:
            for task in tasks:
                if not task.done():
                    task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _call(self, provider: Provider, wire: EmbedWire, model: str, part: EmbedPart) -> EmbedResult:
        """One upstream call for one part: its vectors, or the upstream's error as a ``GatewayError``."""
        settings = provider.settings
        call = wire.build(self.req, part, model, settings)
        capture = self.capture if self.parts == 1 else None
        if capture is not None:
            capture.upstream_request(provider.name, settings.dialect, model, call, orjson.dumps(call.body))
        try:
            async with asyncio.timeout(settings.first_byte_timeout):
                response = await send_upstream(provider, call, capture)
                try:
                    status = response.status_code
                    if status >= 400 or status < 200:
                        raise await upstream_error(provider, response)
                    data = await http_client.read_at_most(response, MAX_ANSWER_BYTES)
                finally:
                    await provider.close_response(response)
        except TimeoutError:
            raise GatewayError(
                "timeout", f"upstream {provider.name} did not answer within {settings.first_byte_timeout:g}s", 504
            ) from None
        return wire.decode(Answer(status, data, response.headers), part, self.req)


def _assemble(results: list[EmbedResult | None]) -> EmbedResult:
    """The parts' vectors in input order, their usage summed (unknown if any part reported none)."""
    if len(results) == 1:
        only = results[0]
        assert only is not None
        return only
    vectors: list[Vector] = []
    tokens: int | None = 0
    for part in results:
        assert part is not None
        vectors += part.vectors
        tokens = None if tokens is None or part.input_tokens is None else tokens + part.input_tokens
    return EmbedResult(vectors, tokens)
