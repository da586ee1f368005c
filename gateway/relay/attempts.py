"""Opening the upstream: retries and fallbacks, all before the first byte reaches the caller.

An attempt succeeds once the upstream answered 2xx *and* its first content-bearing events are
decoded; only then does the caller's response start. Connect errors, timeouts to first byte,
429, 5xx, and an in-stream error or cut before any content are retried with jittered backoff
(honouring ``Retry-After``), then the route's fallbacks are tried in order — each may speak
another dialect, since the request is rebuilt from the IR for every attempt. An error no wait
heals (``GatewayError.lasting``, set by the dialect that decoded it: a spent account's 429
``insufficient_quota``, a billing error, a refused key) is not retried: the next target or
fallback is tried at once, and the target is not cooled as for a rate limit.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import orjson

from gateway.dialects.base import UpstreamCall
from gateway.dialects.carry import CannotCarry, judge, lost_hints, refusal
from gateway.dialects.items import without_lost_items
from gateway.dialects.registry import codec_for
from gateway.errors import GatewayError
from gateway.events import BlockStart, End, Event, StreamError, Usage
from gateway.http import client as http_client
from gateway.http.client import Response
from gateway.ir import ChatRequest
from gateway.relay.exchange import Attempt
from gateway.routing.router import Resolved, Target
from gateway.telemetry import inspector
from gateway.upstream.providers import Provider
from gateway.upstream.source import EventSource, HttpEventSource

if TYPE_CHECKING:
    from gateway.routing.targets import Routing
    from gateway.telemetry.traces import RequestTrace

log = logging.getLogger("gateway.attempts")

RETRYABLE = {"rate_limit", "overloaded", "api_error", "bad_gateway", "timeout", "truncated"}


class AttemptsFailed(GatewayError):
    """No target answered: the error the caller gets (the last upstream failure, or why no
    target could carry the request), with every attempt that was made, in order."""

    def __init__(self, err: GatewayError, attempts: list[Attempt]) -> None:
        super().__init__(
            err.kind,
            err.message,
            err.status,
            raw=err.raw,
            origin=err.origin,
            param=err.param,
            retry_after=err.retry_after,
        )
        self.attempts = attempts


@dataclass(slots=True)
class Opened:
    source: EventSource
    first: list[Event]
    provider: Provider
    target: Target
    attempts: list[Attempt] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)  # IR fields the answering upstream was sent without
    on_close: Callable[[Usage | None], Awaitable[None]] | None = (
        None  # routing: one fewer in flight, the tokens it used
    )
    # What the caller may see of each batch (the answer guardrails, gateway/guardrails/): applied by
    # ``batches`` so whole replies and detached generations get it as one mechanism.
    filter: Callable[[list[Event]], Awaitable[list[Event]]] | None = None

    async def close(self, usage: Usage | None = None) -> None:
        """Close the upstream answer and tell routing the target is done with it, and the tokens
        it used (``usage``: what the caller's record merged; else what the decoder read)."""
        usage = usage or self.source.usage_so_far()
        try:
            await self.source.aclose()
        finally:
            done, self.on_close = self.on_close, None
            if done is not None:
                await done(usage)


def _retry_after(response: Response) -> float | None:
    """Seconds the upstream asked us to wait: ``retry-after-ms`` (OpenAI), else ``retry-after``
    in seconds or as an HTTP date."""
    headers = response.headers
    value = headers.get("retry-after-ms")
    if value is not None:
        try:
            return max(0.0, float(value) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        from email.utils import parsedate_to_datetime

        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


async def _first_events(source: EventSource) -> list[Event]:
    """Read until something beyond MessageStart/Usage arrives (content, End or StreamError)."""
    events: list[Event] = []
    while not source.done:
        batch = await source.next_batch(until_content=True)
        events += batch
        if any(isinstance(e, (BlockStart, End, StreamError)) for e in batch):
            break
    return events


def build_call(provider: Provider, target: Target, req: ChatRequest, stream: bool) -> UpstreamCall:
    """The upstream call for one attempt, or ``CannotCarry`` before anything is sent (carry.py)."""
    settings = provider.settings
    codec = codec_for(settings.dialect)
    dropped = judge(req, provider.limits, settings.drop_unsupported, settings.refuse_unsupported)
    if req.dialect and req.dialect != settings.dialect:
        dropped += lost_hints(req, settings.dialect, codec_for(req.dialect).hints)
    req, lost = without_lost_items(req, settings.dialect)  # (a stored history may hold any dialect's)
    dropped += lost
    options = provider.build_options(stream)
    call = provider.platform.adapt(
        codec.build_request(req, target.upstream_model, options), target.upstream_model, settings
    )
    call.dropped[:0] = dropped
    return call


@dataclass(slots=True)
class _Failures:
    """What the attempts of one request ran into: the last upstream failure, and the first target
    that could not carry the request (nothing was sent to it)."""

    last: GatewayError | None = None
    refused: GatewayError | None = None

    def final(self) -> GatewayError:
        # Only when no target could carry the request is the refusal the answer; a target that was
        # tried and failed says more (it may answer on a retry).
        final = self.last or self.refused
        assert final is not None
        return final


@dataclass(slots=True)
class _Opening:
    """One request's open_upstream: what every attempt of it reads, and what they ran into."""

    providers: dict[str, Provider]
    req: ChatRequest
    passthrough_dialect: str | None
    stream_upstream: bool
    attempts: list[Attempt]
    trace: RequestTrace | None
    failures: _Failures = field(default_factory=_Failures)
    max_wait: float = 10.0  # the route's max_wait_seconds: all this request may wait on upstreams' say-so
    waited: float = 0.0  # what it waited so far (Retry-After before retries, recoveries)
    tried: set[str] = field(default_factory=set)  # the targets this request sent to (never sent to again)

    def may_wait(self, seconds: float) -> bool:
        """Whether a wait of ``seconds`` still fits ``max_wait``; if so it is counted as waited."""
        if self.waited + seconds > self.max_wait:
            return False
        self.waited += seconds
        return True


async def send_upstream(provider: Provider, call: UpstreamCall, capture: inspector.Capture | None) -> Response:
    """``call`` sent to ``provider`` (and shown to the inspector's ``capture``): its response, or the
    transport's failure as a ``GatewayError``. A redirect is refused, not followed: it means a wrong
    ``base_url``, and the answer says so. Shared by chat attempts and embeddings parts."""
    try:
        response = await provider.send(call)
        if capture is not None:
            response = capture.upstream_response(response)
    except http_client.TimeoutException as exc:
        raise GatewayError(
            "timeout", f"upstream {provider.name} did not answer in time ({type(exc).__name__})", 504
        ) from None
    except http_client.HTTPError as exc:
        raise GatewayError("bad_gateway", f"upstream {provider.name} unreachable ({type(exc).__name__})", 502) from None
    if 300 <= response.status_code < 400:
        where = response.headers.get("location", "?")
        await provider.close_response(response)
        raise GatewayError(
            "bad_gateway",
            f"upstream {provider.name} redirected (HTTP {response.status_code} to {where}): check its base_url",
            502,
        )
    return response


async def upstream_error(provider: Provider, response: Response) -> GatewayError:
    """An upstream's error answer as the ``GatewayError`` its platform or dialect decodes it to,
    with the wait it asked for. A 401/403 refused the *gateway's* credentials (the caller's key was
    fine, so a 401 would mislead it): a 502 with the provider's message, lasting (no retry, no cooldown)."""
    status = response.status_code
    body = await http_client.read_at_most(response, 1 << 20)  # an error body: a megabyte says enough
    err = provider.platform.decode_error(status, response.headers, body) or codec_for(
        provider.settings.dialect
    ).decode_error(status, body)
    err.retry_after = _retry_after(response) or err.retry_after  # else the body's hint (Google's RetryInfo)
    if status in (401, 403):
        return GatewayError(
            "bad_gateway",
            f"upstream {provider.name} rejected the gateway's credentials: {err.message}",
            502,
            lasting=True,
        )
    return err


async def _attempt(
    op: _Opening, provider: Provider, target: Target, attempt: Attempt
) -> tuple[EventSource, list[Event], list[str]]:
    settings = provider.settings
    req = op.req
    codec = codec_for(settings.dialect)
    call = build_call(provider, target, req, req.stream or op.stream_upstream)
    response: Response | None = None
    source: HttpEventSource | None = None
    try:
        async with asyncio.timeout(settings.first_byte_timeout):
            capture = inspector.CURRENT.get() if inspector.ACTIVE else None
            if capture is not None:
                capture.upstream_request(
                    provider.name,
                    settings.dialect,
                    target.upstream_model,
                    call,
                    orjson.dumps(call.body) if call.method != "GET" else None,
                )
            response = await send_upstream(provider, call, capture)
            if response.status_code >= 400 or response.status_code < 200:
                raise await upstream_error(provider, response)
            source = HttpEventSource(provider, response, codec)
            if capture is not None:
                capture.watch_events(source)
            source.keep_frames = (
                settings.dialect == op.passthrough_dialect and provider.forwards_frames and not source.is_json
            )
            first = await _first_events(source)
    except TimeoutError:
        if source is not None:
            _keep_usage(attempt, source)
            await source.aclose()
        elif response is not None:
            await provider.close_response(response)
        raise GatewayError(
            "timeout", f"upstream {provider.name} sent no first byte within {settings.first_byte_timeout:g}s", 504
        ) from None
    except BaseException:
        if source is not None:
            _keep_usage(attempt, source)
            await source.aclose()
        elif response is not None:
            await provider.close_response(response)
        raise
    leading_error = next((e for e in first if isinstance(e, StreamError)), None)
    if leading_error is not None and not any(isinstance(e, BlockStart) for e in first):
        _keep_usage(attempt, source)  # refused in-stream (say after message_start): its input was counted
        await source.aclose()
        raise GatewayError(
            leading_error.kind,
            leading_error.message,
            leading_error.status,
            raw=leading_error.raw,
            origin=settings.dialect,
            lasting=leading_error.lasting,
        )
    return source, first, call.dropped


def _keep_usage(attempt: Attempt, source: EventSource) -> None:
    attempt.usage = source.usage_so_far()


async def batches(opened: Opened) -> AsyncIterator[list[Event]]:
    """The opened upstream's events, batch by batch, always ending with ``End`` or ``StreamError``.

    An upstream silent past its idle timeout, or a source that ends without a terminator, ends with
    a ``StreamError``. Used by whole replies and detached generations; the streaming relay keeps
    per-chunk timers out of its loop and uses ``StreamWriter``'s watchdog instead.
    """
    source = opened.source
    idle = opened.provider.settings.idle_timeout
    batch = opened.first
    while True:
        if opened.filter is not None:
            batch = await opened.filter(batch)
        yield batch
        if batch and isinstance(batch[-1], (End, StreamError)):
            return
        if source.done:
            yield [StreamError("truncated", "upstream stream ended without its terminator", 502)]
            return
        try:
            async with asyncio.timeout(idle):
                batch = await source.next_batch()
        except TimeoutError:
            yield [StreamError("timeout", f"upstream sent nothing for {idle:g}s", 504)]
            return


async def open_upstream(
    providers: dict[str, Provider],
    req: ChatRequest,
    resolved: Resolved,
    passthrough_dialect: str | None = None,
    *,
    stream_upstream: bool = False,
    trace: RequestTrace | None = None,
    attempts: list[Attempt] | None = None,
    routing: Routing | None = None,
) -> Opened:
    """Try the route's targets in order. ``passthrough_dialect``: keep raw frames from an upstream
    of that dialect (the caller's, when streaming) for the same-dialect fast path. The upstream is
    asked for a stream when the caller streams (or ``stream_upstream``: detached runs log events
    as they come); a whole caller gets a whole upstream call, decoded by ``decode_whole``.
    ``attempts``: the list each attempt is appended to as it starts, so a caller that is cancelled
    meanwhile (the client hung up) still knows what was tried and what it used.
    ``routing``: for a route with ``targets``, the balancer, cooldowns and affinity (routing.py);
    without it every route is tried in its configured order.
    ``trace`` (telemetry on): each attempt is a CLIENT span of the request's trace.
    No target answered: ``AttemptsFailed``, the caller's error with every attempt made."""
    op = _Opening(providers, req, passthrough_dialect, stream_upstream, [] if attempts is None else attempts, trace)
    op.max_wait = resolved.max_wait
    try:
        if routing is not None and resolved.balanced:
            return await _open_balanced(op, resolved, routing)
        for fallback, target in enumerate(resolved.targets):
            if target.key in op.tried:
                continue  # a fallback naming a target this request already failed on
            op.tried.add(target.key)
            opened = await _try_target(op, target, fallback=fallback)
            if isinstance(opened, Opened):
                return opened
        raise op.failures.final()
    except GatewayError as err:
        raise AttemptsFailed(err, op.attempts) from None


async def _try_target(
    op: _Opening, target: Target, tries: int | None = None, fallback: int = 0
) -> Opened | GatewayError | None:
    """One target, with its provider's retries (or ``tries`` attempts): the opened answer, or the
    last retryable error, or None when the target cannot carry the request (nothing was sent; the
    refusal is kept in ``failures``). A non-retryable error (the request itself is wrong) is raised."""
    provider = op.providers[target.provider]
    req, trace, failures = op.req, op.trace, op.failures
    tries = provider.settings.max_retries + 1 if tries is None else tries
    last: GatewayError | None = None
    for number in range(tries):
        started = time.perf_counter()
        record = Attempt(provider.name, target.upstream_model)
        op.attempts.append(record)
        span = (
            trace.attempt_started_for(provider, target, req, fallback, req.stream or op.stream_upstream)
            if trace is not None
            else None
        )
        try:
            source, first, dropped = await _attempt(op, provider, target, record)
        except CannotCarry as exc:
            record.status, record.error = 400, "cannot_carry"
            if (
                trace is not None and span is not None
            ):  # as in the access log: the target was considered, nothing was sent
                trace.attempt_failed(span, None, "cannot_carry")
            failures.refused = failures.refused or refusal(
                exc, codec_for(req.dialect).params if req.dialect else {}, provider.name, provider.dialect
            )
            return None  # the next target may speak a dialect that carries it
        except GatewayError as err:
            record.status, record.error, record.ms = err.status, err.kind, (time.perf_counter() - started) * 1000
            if trace is not None and span is not None:
                trace.attempt_failed(span, err)
            last = failures.last = err
            if err.lasting:
                break  # no wait heals it (a spent account, a refused key): the next target, at once
            if err.kind not in RETRYABLE:
                raise  # open_upstream hands it on with the attempts
            delay = provider.settings.retry_backoff * (2**number) * (0.5 + random.random())
            if err.retry_after is not None:
                if number + 1 < tries and (
                    err.retry_after > provider.settings.max_retry_after or not op.may_wait(err.retry_after)
                ):
                    break  # too long to wait (the provider's max_retry_after, the route's max_wait_seconds): move on
                delay = max(delay, err.retry_after)
            if number + 1 < tries:
                log.info("retrying %s after %s (%.2fs)", provider.name, err.kind, delay)
                await asyncio.sleep(delay)
            continue
        except BaseException as exc:  # cancelled (the caller left) or a bug: the span still ends
            if trace is not None and span is not None:
                trace.attempt_failed(
                    span, None, "cancelled" if isinstance(exc, asyncio.CancelledError) else type(exc).__name__
                )
            raise
        record.status, record.ms = 200, (time.perf_counter() - started) * 1000
        if trace is not None and span is not None:
            trace.attempt_opened(span, first)
        return Opened(source, first, provider, target, op.attempts, dropped)
    assert last is not None
    return last


async def _open_balanced(op: _Opening, resolved: Resolved, routing: Routing) -> Opened:
    """A route over several targets (docs/routing-failures.md). Each healthy target once, in the
    strategy's order (the session's target first); a failure cools the target and moves on at once
    (the others are the retry; the last healthy one gets its provider's ``max_retries``). A target
    this request sent to is never sent to again by it. When every pool target has failed for this
    request or is cooling, the fallbacks come next, each with its provider's retries. Only when none
    is left does the request wait for the earliest recovery of a target it has not tried (one that
    cooled before it: earlier requests' failures, a 429's Retry-After), and only if that wait fits
    the route's ``max_wait_seconds``; else the caller gets the last upstream error, or 429/503 with
    ``Retry-After`` when the targets are cooling, at once."""
    req, failures, tried = op.req, op.failures, op.tried
    pool = resolved.targets[: resolved.pool]
    last: GatewayError | None = None
    awaited: set[str] = set()  # targets waited for (each at most once: the loop ends)
    fallbacks_done = False
    while True:
        plan = await routing.plan(req, resolved, tried)
        for number, target in enumerate(plan.candidates):
            hold = await routing.admit(resolved, target, req, plan)
            if hold is False:
                continue
            tried.add(target.key)
            await routing.started(resolved, target)
            # Another healthy target is the retry; the last one left gets its provider's retries.
            tries = 1 if number + 1 < len(plan.candidates) else None
            try:
                opened = await _try_target(op, target, tries=tries)
            except BaseException:
                await routing.ended(resolved, target, None, hold)
                raise
            if isinstance(opened, Opened):
                await routing.served(resolved, target, plan, op.attempts[-1].ms / 1000)
                opened.on_close = lambda usage, t=target, h=hold: routing.ended(resolved, t, usage, h)
                return opened
            await routing.ended(resolved, target, None, hold)
            if opened is not None:  # (None: it cannot carry this request; nothing was sent, it stays healthy)
                await routing.failed(resolved, target, opened.kind, opened.retry_after, lasting=opened.lasting)
                last = opened
        if not fallbacks_done:
            fallbacks_done = True
            for fallback, target in enumerate(resolved.targets[resolved.pool :], 1):
                if target.key in tried:
                    continue
                tried.add(target.key)
                opened = await _try_target(op, target, fallback=fallback)
                if isinstance(opened, Opened):
                    return opened
                last = opened or last
        # Nothing left to try now: wait for a target this request has not tried, if it recovers in time.
        left = await routing.cooling(pool)
        waits = [(s, t.key) for t, s in zip(pool, left) if s > 0 and t.key not in tried and t.key not in awaited]
        if waits:
            wait, key = min(waits)
            if op.may_wait(wait):
                log.info("every target of %s is cooling: waiting %.2fs for %s to recover", resolved.route, wait, key)
                awaited.add(key)
                await asyncio.sleep(wait + 0.001)
                continue
        break
    recovery = min((s for s in left if s > 0), default=None)
    if last is None and failures.refused is not None:
        raise failures.final()  # no target can carry the request: the refusal is the answer
    if recovery is not None and (last is None or (last.kind in ("rate_limit", "overloaded") and not last.lasting)):
        err = GatewayError(
            "rate_limit" if last is None or last.kind == "rate_limit" else "overloaded",
            f"every target of {resolved.route!r} is cooling down after failures; retry in {math.ceil(recovery)}s",
            retry_after=recovery,
        )
    elif last is not None:
        err = last
    else:  # every target passed over for its rpm/tpm: retry when the first has room (its sliding window says when)
        wait = plan.limited if plan.limited is not None else 60 - time.time() % 60
        err = GatewayError(
            "rate_limit",
            f"every target of {resolved.route!r} is at its rpm/tpm limit; retry in {max(1, math.ceil(wait))}s",
            retry_after=wait,
        )
    raise err
