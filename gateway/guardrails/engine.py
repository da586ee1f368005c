"""Config → compiled guardrails, and the per-request pass over the IR and the answer's events.

``Guardrails.for_request`` gives a request the union of its route's and its key's guardrails (the
route's first, each once, in config order within each); ``RequestGuard.check_request`` redacts,
blocks or records on the request IR before anything goes upstream; ``RequestGuard.filter`` is the
answer's pass: text, thinking and tool-call argument deltas go through one ``StreamRedactor`` per
block and guardrail, held text is released before the block ends.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from gateway.errors import GatewayError
from gateway.events import BlockStart, BlockStop, End, Event, StreamError, TextDelta, ThinkingDelta, ToolArgsDelta
from gateway.guardrails.pii import CHARSETS, RECOGNIZERS, TRIGGERS, Check, always
from gateway.guardrails.scanner import Hit, Scanner, StreamRedactor
from gateway.guardrails.webhook import Webhook
from gateway.ir import ChatRequest, OpaquePart, TextPart, ToolCallPart, ToolResultPart
from gateway.settings import GuardrailSettings, RegexPattern, Settings

_DELTAS = (TextDelta, ThinkingDelta, ToolArgsDelta)


class GuardrailConfigError(ValueError):
    """A [[guardrails]] entry or a reference to one that cannot work: startup stops and says why."""


@dataclass(slots=True)
class Guardrail:
    name: str
    action: str  # redact | block | log
    request: bool
    response: bool
    scanner: Scanner | None  # None: a webhook
    webhook: Webhook | None = None
    presidio: Any = None  # a PresidioRedactor (the extra), requests only


def compile_guardrail(spec: GuardrailSettings) -> Guardrail:
    if spec.kind == "webhook":
        if not spec.url:
            raise GuardrailConfigError(f"guardrail {spec.name!r}: kind webhook needs url")
        hook = Webhook(spec.url, spec.timeout_ms / 1000, spec.fail == "open")
        return Guardrail(spec.name, spec.action, "request" in spec.on, False, None, hook)
    if spec.kind == "presidio":
        from gateway.guardrails.presidio import PresidioRedactor, PresidioUnavailable

        try:
            redactor = PresidioRedactor(spec.name, spec.model, spec.entities)
        except PresidioUnavailable as exc:
            raise GuardrailConfigError(str(exc)) from None
        return Guardrail(spec.name, spec.action, "request" in spec.on, False, None, None, redactor)
    if spec.kind == "pii":
        types = spec.types or list(RECOGNIZERS)
        unknown = [t for t in types if t not in RECOGNIZERS]
        if unknown:
            raise GuardrailConfigError(
                f"guardrail {spec.name!r}: unknown pii types {unknown}; known: {', '.join(RECOGNIZERS)}"
            )
        chosen = [(t, *RECOGNIZERS[t]) for t in RECOGNIZERS if t in types]  # the built-in priority order
        scanner = Scanner(chosen, TRIGGERS, CHARSETS)
    else:
        if not spec.patterns:
            raise GuardrailConfigError(f"guardrail {spec.name!r}: kind regex needs patterns")
        items: list[tuple[str, str, Check]] = []
        for p in spec.patterns:
            name, pattern = (p.name, p.pattern) if isinstance(p, RegexPattern) else (spec.name, p)
            items.append((name, pattern, always))
        try:
            scanner = Scanner(items)
        except Exception as exc:
            raise GuardrailConfigError(f"guardrail {spec.name!r}: a pattern does not compile: {exc}") from None
    return Guardrail(spec.name, spec.action, "request" in spec.on, "response" in spec.on, scanner)


class Guardrails:
    """Every configured guardrail, compiled once at startup, and who gets which."""

    def __init__(self, settings: Settings) -> None:
        self.by_name: dict[str, Guardrail] = {}
        for spec in settings.guardrails:
            if spec.name in self.by_name:
                raise GuardrailConfigError(f"guardrail {spec.name!r} is defined twice")
            self.by_name[spec.name] = compile_guardrail(spec)
        self.routes = {r.model: tuple(r.guardrails) for r in settings.routes if r.guardrails}
        self.keys = {k.name: tuple(k.guardrails) for k in settings.keys if k.guardrails}
        for where, table in (("route", self.routes), ("key", self.keys)):
            for owner, names in table.items():
                for name in names:
                    if name not in self.by_name:
                        raise GuardrailConfigError(
                            f"{where} {owner!r} names guardrail {name!r}, which no [[guardrails]] entry defines"
                        )
        self._cache: dict[tuple[str, str | None], tuple[Guardrail, ...]] = {}

    def for_request(self, route: str, key: str | None) -> RequestGuard | None:
        if not self.routes and not self.keys:
            return None
        cache_key = (route, key)
        chosen = self._cache.get(cache_key)
        if chosen is None:
            names = dict.fromkeys((*self.routes.get(route, ()), *self.keys.get(key or "", ())))
            chosen = tuple(self.by_name[n] for n in names)
            if len(self._cache) < 4096:
                self._cache[cache_key] = chosen
        return RequestGuard(chosen) if chosen else None


def _note(acted: list[dict[str, Any]], g: Guardrail, where: str, hits: list[Hit]) -> None:
    types = sorted({h.type for h in hits})
    for entry in acted:
        if entry["name"] == g.name and entry["where"] == where:
            entry["types"] = sorted({*entry["types"], *types})
            return
    acted.append({"name": g.name, "action": g.action, "where": where, "types": types})


def blocked(g: Guardrail, where: str) -> GatewayError:
    """The 400 of a block: each dialect renders the kind (OpenAI's ``code`` is ``guardrail_blocked``)."""
    return GatewayError("guardrail_blocked", f"guardrail {g.name!r} blocked the {where}", 400, param=g.name)


@dataclass(slots=True)
class RequestGuard:
    """The guardrails of one request, and what they did (``acted``: the access log's ``guardrails``)."""

    guardrails: tuple[Guardrail, ...]
    acted: list[dict[str, Any]] = field(default_factory=list)
    _streams: dict[tuple[int, int], StreamRedactor] = field(default_factory=dict)
    _last: dict[int, Event] = field(default_factory=dict)  # a block's last delta: the kind its held text goes out as
    _stopped: bool = False

    async def check_request_async(self, req: ChatRequest) -> None:
        """``check_request``, then each webhook guardrail's verdict on the texts (requests only)."""
        self.check_request(req)
        for g in self.guardrails:
            if g.webhook is None or not g.request:
                continue
            texts: list[str] = []

            def collect(text: str, texts: list[str] = texts) -> str:
                texts.append(text)
                return text

            _walk(req, collect)
            verdict = await g.webhook.check(g.name, texts)
            if verdict.action == "allow":
                continue
            _note(self.acted, g, "request", [Hit(0, 0, "webhook")])
            if g.action == "log" and not verdict.failed:  # recorded, forwarded unchanged
                continue
            if verdict.action == "block" or g.action == "block":
                err = blocked(g, "request")
                if verdict.reason:
                    err.message = f"{err.message}: {verdict.reason}"
                raise err
            if verdict.action == "redact" and verdict.texts is not None and g.action == "redact":
                replaced = iter(verdict.texts)
                _walk(req, lambda _text, replaced=replaced: next(replaced))

    @property
    def on_response(self) -> bool:
        return any(g.response for g in self.guardrails)

    @property
    def redacts(self) -> bool:
        return any(g.action == "redact" for g in self.guardrails)

    # -- the request ---------------------------------------------------------------------------

    def check_request(self, req: ChatRequest) -> None:
        """Every text the model will see, in place; raises the in-dialect 400 of a blocking hit."""
        for g in self.guardrails:
            redactor = g.scanner or g.presidio
            if not g.request or redactor is None:
                continue
            hits: list[Hit] = []

            def apply(text: str, g: Guardrail = g, hits: list[Hit] = hits, redactor: Any = redactor) -> str:
                out, found = redactor.redact(text)
                if not found:
                    return text
                hits.extend(found)
                if g.action == "block":
                    raise _Blocked
                return out if g.action == "redact" else text

            try:
                _walk(req, apply)
            except _Blocked:
                _note(self.acted, g, "request", hits)
                raise blocked(g, "request") from None
            if hits:
                _note(self.acted, g, "request", hits)

    # -- the answer ----------------------------------------------------------------------------

    def filter(self, batch: list[Event]) -> list[Event]:
        """The batch as the caller may see it. A block ends it with an error, nothing of the match sent."""
        if self._stopped:
            return []
        out: list[Event] = []
        for event in batch:
            kind = type(event)
            if kind in _DELTAS:
                text = event.fragment if kind is ToolArgsDelta else event.text  # type: ignore[union-attr]
                self._last[event.index] = event  # type: ignore[union-attr]
                for i, g in enumerate(self.guardrails):
                    if not g.response or g.scanner is None:
                        continue
                    red = self._streams.get((event.index, i))  # type: ignore[union-attr]
                    if red is None:
                        red = self._streams[(event.index, i)] = StreamRedactor(g.scanner, g.action == "redact")  # type: ignore[union-attr]
                    text = red.feed(text)
                    if self._check(red, g, out):
                        return out
                if text:
                    out.append(_with_text(event, text))
            elif isinstance(event, BlockStart) and event.item is not None:
                # an item kept whole (gateway/dialects/items.py): a caller of its dialect gets it
                # verbatim, so its texts are checked here, at once
                start = event
                item = start.item
                for g in self.guardrails:
                    if not g.response or g.scanner is None:
                        continue
                    hits: list[Hit] = []
                    item = _item_texts(item, lambda t, g=g, hits=hits: _redacted(g, t, hits))
                    if hits:
                        _note(self.acted, g, "response", hits)
                        if g.action == "block":
                            err = blocked(g, "answer")
                            out.append(StreamError(err.kind, err.message, 400))
                            self._stopped = True
                            return out
                out.append(replace(start, item=item))
            elif kind is BlockStop or kind is End or kind is StreamError:
                indexes = [event.index] if kind is BlockStop else sorted({k[0] for k in self._streams})  # type: ignore[union-attr]
                for index in indexes:
                    if self._release(index, out):
                        return out
                out.append(event)
            else:
                out.append(event)
        return out

    def _release(self, index: int, out: list[Event]) -> bool:
        """A block's held text through the remaining guardrails, as one delta of its kind."""
        keys = sorted(k for k in self._streams if k[0] == index)
        if not keys:
            return False
        template = self._last.pop(index, None)
        text = ""
        for i, g in enumerate(self.guardrails):
            red = self._streams.pop((index, i), None)
            if red is None:
                continue
            text = red.feed(text) + red.flush() if text else red.flush()
            if self._check(red, g, out):
                return True
        if text and template is not None:
            out.append(_with_text(template, text))
        return False

    def _check(self, red: StreamRedactor, g: Guardrail, out: list[Event]) -> bool:
        if not red.hits:
            return False
        _note(self.acted, g, "response", red.hits)
        red.hits.clear()
        if g.action != "block":
            return False
        err = blocked(g, "answer")
        out.append(StreamError(err.kind, err.message, 400))
        self._stopped = True
        return True


class _Blocked(Exception):
    pass


def _with_text(event: Any, text: str) -> Event:
    if type(event) is ToolArgsDelta:
        return ToolArgsDelta(event.index, text)
    return type(event)(event.index, text)  # type: ignore[no-any-return]


# an item's fields that are names and ids, not text a model or a person wrote
_ITEM_IDS = frozenset({"type", "id", "call_id", "tool_use_id", "status", "encrypted_content", "signature"})


def _item_texts(value: Any, apply: Any) -> Any:
    """A kept item (``ToolCallPart.item``, ``BlockStart.item`` …) with ``apply`` run over its texts."""
    if isinstance(value, str):
        return apply(value)
    if isinstance(value, dict):
        return {k: v if k in _ITEM_IDS else _item_texts(v, apply) for k, v in value.items()}
    if isinstance(value, list):
        return [_item_texts(v, apply) for v in value]
    return value


def _redacted(g: Guardrail, text: str, hits: list[Hit]) -> str:
    assert g.scanner is not None
    out, found = g.scanner.redact(text)
    hits.extend(found)
    return out if found and g.action == "redact" else text


def _walk(req: ChatRequest, apply: Any) -> None:
    for part in req.system:
        part.text = apply(part.text)
    for message in req.messages:
        for p in message.content:
            if isinstance(p, TextPart):
                p.text = apply(p.text)
            elif isinstance(p, ToolCallPart):
                p.arguments = apply(p.arguments)
                if p.item is not None:  # sent verbatim to an upstream of its dialect
                    p.item = _item_texts(p.item, apply)
            elif isinstance(p, ToolResultPart):
                for c in p.content:
                    if isinstance(c, TextPart):
                        c.text = apply(c.text)
                if p.item is not None:
                    p.item = _item_texts(p.item, apply)
            elif isinstance(p, OpaquePart):
                p.item = _item_texts(p.item, apply)
