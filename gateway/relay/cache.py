"""The exact response cache: an identical request answered from the ``[store]``, in any dialect.

Why it is built this way:

* The key is a hash of the route, the model asked for, the owner (the named key under
  ``scope = "key"``; the plain ``[auth]`` keys and open access are one owner) and the request
  IR's fields that decide the answer — system, turns, tools, tool choice, response format,
  sampling, max tokens, reasoning, and the dialect-only extras. Not the caller's dialect, not
  streaming: the same conversation asked through the Anthropic SDK after the OpenAI one is the
  same entry. orjson serialises the IR's dataclasses directly, so building the key is one
  ``dumps`` and one SHA-256.
* What is kept is the event union (gateway/events.py) of one complete, successful answer, with
  adjacent deltas of a block joined: the caller's own encoder turns it into its dialect on a hit,
  streamed or whole, so nothing dialect-specific is stored and a hit goes down the same path as
  an upstream answer (``ReplaySource`` is an ``EventSource``) — encoding, access log, traces,
  a stored Responses answer all stay one path. The events are read beside the same-dialect fast
  path too (its source decodes every frame).
* Never kept: an error or a cut stream (no ``End``), a refusal, a content filter, a paused turn,
  an answer without usage, one over ``max_entry_bytes``. A store that fails is a miss, logged,
  never a failed request.
* A hit gets fresh ids (the message's and its tool calls'), costs nothing (the ledger prices it
  as ``cost_saved_usd`` instead) and holds no tokens against tpm; it still counts as a request.
"""

from __future__ import annotations

import hashlib
import logging
import re
import secrets
from typing import TYPE_CHECKING, Any

import orjson

from gateway.events import (
    BlockStart,
    BlockStop,
    End,
    Event,
    MessageStart,
    SignatureDelta,
    StreamError,
    TextDelta,
    ThinkingDelta,
    ToolArgsDelta,
    Usage,
)
from gateway.relay.attempts import Opened
from gateway.relay.cache_ticket import Ticket
from gateway.upstream.source import EventSource

if TYPE_CHECKING:
    from gateway.ir import ChatRequest
    from gateway.routing.router import Resolved
    from gateway.settings import CacheSettings
    from gateway.store.base import Store
    from gateway.telemetry.observe import AccessRecord, Metrics
    from gateway.upstream.providers import Provider

log = logging.getLogger("gateway.cache")

HEADER = b"x-gateway-cache"
FORMAT = 1  # the stored entry's layout; another number is a miss
_KEPT_REASONS = frozenset(("stop", "length", "tool_use"))  # complete answers (a refusal, a filter, a pause are not)
_EXTRAS_NOT_KEYED = frozenset(("prompt_cache_key", "prompt_cache_retention", "stream_options", "safety_identifier"))
_TYPES: dict[str, type[Any]] = {
    cls.__name__: cls
    for cls in (
        MessageStart,
        BlockStart,
        TextDelta,
        ToolArgsDelta,
        ThinkingDelta,
        SignatureDelta,
        BlockStop,
        Usage,
        End,
    )
}
_ID_PREFIX = re.compile(r"^[A-Za-z]+[_-]")


def request_key(route: str, owner: str, req: ChatRequest) -> str:
    """The entry's name: what decides the answer, hashed (see the module doc)."""
    extras = {
        dialect: {k: v for k, v in fields.items() if k not in _EXTRAS_NOT_KEYED}
        for dialect, fields in req.extras.items()
    }
    material = orjson.dumps(
        (
            FORMAT,
            route,
            req.model,
            owner,
            req.system,
            req.messages,
            req.tools,
            req.tool_choice,
            req.parallel_tool_calls,
            req.max_tokens,
            req.temperature,
            req.top_p,
            req.top_k,
            req.stop,
            req.thinking,
            req.response_format,
            req.previous_id,
            req.headers,
            {k: v for k, v in extras.items() if v},
        ),
        option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS,
    )
    return hashlib.sha256(material).hexdigest()


class ReplaySource(EventSource):
    """A stored answer as an event source: everything in one batch (``Opened.first``)."""

    def __init__(self, events: list[Event]) -> None:
        self.events = events
        self.done = True

    async def next_batch(self, until_content: bool = False) -> list[Event]:
        return []  # (never called: the first batch already ends with End)


class ResponseCache:
    def __init__(self, settings: CacheSettings, store: Store, metrics: Metrics) -> None:
        self.settings, self.store, self.metrics = settings, store, metrics

    def ticket(
        self, req: ChatRequest, resolved: Resolved, key_name: str | None, headers: dict[str, str]
    ) -> Ticket | None:
        """The request's ticket; None when the cache stays out of it entirely (a route with
        ``cache = false``, a background run). ``x-gateway-cache: no-cache`` skips the lookup,
        ``no-store`` the keeping."""
        if not resolved.cache or req.background:
            return Ticket("", resolved.route, False, False)
        asked = headers.get("x-gateway-cache", "").lower()
        owner = "*" if self.settings.scope == "shared" else (key_name or "")
        return Ticket(
            request_key(resolved.route, owner, req), resolved.route, "no-cache" not in asked, "no-store" not in asked
        )

    async def replay(
        self, ticket: Ticket, providers: dict[str, Provider], record: AccessRecord, headers: list[tuple[bytes, bytes]]
    ) -> Opened | None:
        """The stored answer opened as if an upstream had answered it, or None (a miss or a
        bypass). Sets the ``x-gateway-cache`` response header and the record's ``cache``."""
        opened = await self._find(ticket, providers) if ticket.lookup else None
        if opened is not None:
            ticket.result, ticket.store = "hit", False
        record.cache = ticket.result
        headers.append((HEADER, ticket.result.encode()))
        self.metrics.cache_requests.labels(ticket.route, ticket.result).inc()
        return opened

    async def _find(self, ticket: Ticket, providers: dict[str, Provider]) -> Opened | None:
        try:
            body = await self.store.cache_get(ticket.key)
        except Exception as exc:  # the store is down: answer from upstream
            log.warning("response cache lookup failed (%s: %s): answering from upstream", type(exc).__name__, exc)
            return None
        if body is None:
            return None
        try:
            entry = orjson.loads(body)
            provider = providers.get(entry["provider"])
            if entry.get("v") != FORMAT or provider is None or provider.dialect != entry["dialect"]:
                return None  # kept by another version, or its provider is gone: ask upstream
            events = _fresh_ids([_TYPES[name](*fields) for name, *fields in entry["events"]])
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            log.warning("response cache entry %s is unreadable: answering from upstream", ticket.key[:12])
            return None
        from gateway.routing.router import Target

        return Opened(ReplaySource(events), events, provider, Target(provider.name, entry["model"]))

    async def keep(self, ticket: Ticket, record: AccessRecord) -> None:
        """Keep the answer that just went out, if it is a complete, successful one with usage."""
        events, ticket.events = ticket.events, []
        if not ticket.store or not events or record.error_kind is not None or record.status >= 400:
            return
        end = events[-1]
        if type(end) is not End or end.reason not in _KEPT_REASONS:
            return
        if record.input_tokens is None and record.output_tokens is None:
            return  # usage_missing: a hit could not say what it saved
        if record.provider is None or record.upstream_dialect is None or record.upstream_model is None:
            return
        if any(type(e) is StreamError for e in events):
            return
        if not any(type(e) is Usage for e in events):  # usage the dialect held back: before the end
            events.insert(
                len(events) - 1,
                Usage(
                    record.input_tokens,
                    record.output_tokens,
                    record.cache_read_tokens,
                    record.cache_write_tokens,
                    record.reasoning_tokens,
                ),
            )
        body = orjson.dumps(
            {
                "v": FORMAT,
                "provider": record.provider,
                "dialect": record.upstream_dialect,
                "model": record.upstream_model,
                "events": [[type(e).__name__, *[getattr(e, f) for f in e.__slots__]] for e in _joined(events)],
            }
        )
        if len(body) > self.settings.max_entry_bytes:
            return
        try:
            await self.store.cache_put(ticket.key, body, self.settings.ttl_seconds, self.settings.max_entries)
        except Exception as exc:
            log.warning("response cache could not keep an answer (%s: %s)", type(exc).__name__, exc)


def _joined(events: list[Event]) -> list[Event]:
    """Adjacent deltas of one block as one: a smaller entry and fewer frames to encode on a hit."""
    out: list[Event] = []
    for e in events:
        last = out[-1] if out else None
        kind = type(e)
        if last is not None and type(last) is kind and last.index == e.index:  # type: ignore[union-attr]
            if kind is TextDelta or kind is ThinkingDelta:
                out[-1] = kind(e.index, last.text + e.text)  # type: ignore[union-attr]
                continue
            if kind is ToolArgsDelta:
                out[-1] = ToolArgsDelta(e.index, last.fragment + e.fragment)  # type: ignore[union-attr]
                continue
        out.append(e)
    return out


def _fresh(old: str | None) -> str | None:
    """A new id in the old one's shape (its ``msg_`` / ``chatcmpl-`` / ``toolu_`` prefix kept)."""
    if not old:
        return old
    found = _ID_PREFIX.match(old)
    return (found.group(0) if found else "") + secrets.token_hex(12)


def _fresh_ids(events: list[Event]) -> list[Event]:
    for e in events:
        if type(e) is MessageStart:
            e.id = _fresh(e.id) or e.id
        elif type(e) is BlockStart and e.kind == "tool_call":
            e.id = _fresh(e.id)
    return events
