"""Config → compiled guardrails, and the per-request pass over the IR and the answer's events.

``Guardrails.for_request`` gives a request the union of its route's and its key's guardrails (the
route's first, each once, in config order within each); ``RequestGuard.check_request`` redacts,
blocks or records on the request IR before anything goes upstream (``check_request_async``: every
kind, in config order; presidio's analysis and the webhooks' calls are awaited, never run on the
event loop); ``RequestGuard.filter`` is the answer's pass of the scanning kinds: text, thinking and
tool-call argument deltas go through one ``StreamRedactor`` per block and guardrail, held text is
released before the block ends; ``filter_async`` adds the judging kinds (webhooks and presidio),
which judge each block whole when it ends. ``check_inputs`` is the request pass over an embeddings
request's texts. ``acted`` (the access log's ``guardrails``) stays in config order, request first,
whatever order the kinds ran in.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from gateway.errors import GatewayError
from gateway.events import BlockStart, BlockStop, End, Event, StreamError, TextDelta, ThinkingDelta, ToolArgsDelta
from gateway.guardrails.pii import CHARSETS, LEADS, RECOGNIZERS, SEEDS, TRIGGERS, Check, always
from gateway.guardrails.scanner import Hit, Scanner, StreamRedactor
from gateway.guardrails.webhook import Verdict, Webhook
from gateway.ir import ChatRequest, Message, OpaquePart, TextPart, ToolCallPart, ToolResultPart
from gateway.settings import GuardrailSettings, RegexPattern, Settings


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
    presidio: Any = None  # a PresidioRedactor (the extra)

    def open_stream(self) -> StreamRedactor:
        """A redactor for one block of the answer (a scanning kind)."""
        assert self.scanner is not None
        return StreamRedactor(self.scanner, self.action == "redact", self)

    @property
    def judges(self) -> bool:
        """A kind that judges whole texts, awaited (``webhook``, ``presidio``), not a scanner."""
        return self.scanner is None


WEBHOOK_TIMEOUT_MS = 500  # ``timeout_ms`` unset: a webhook's round-trip
PRESIDIO_TIMEOUT_MS = 10_000  # a presidio analysis (~2.4 s of CPU for a 48 KB block, every entity type)


def compile_guardrail(spec: GuardrailSettings) -> Guardrail:
    if spec.kind == "webhook":
        if not spec.url:
            raise GuardrailConfigError(f"guardrail {spec.name!r}: kind webhook needs url")
        hook = Webhook(spec.url, (spec.timeout_ms or WEBHOOK_TIMEOUT_MS) / 1000, spec.fail == "open")
        return Guardrail(spec.name, spec.action, "request" in spec.on, "response" in spec.on, None, hook)
    if spec.kind == "presidio":
        from gateway.guardrails.presidio import PresidioRedactor, PresidioUnavailable

        try:
            timeout = (spec.timeout_ms or PRESIDIO_TIMEOUT_MS) / 1000
            redactor = PresidioRedactor(
                spec.name, spec.model, spec.entities, timeout=timeout, fail_open=spec.fail == "open"
            )
        except PresidioUnavailable as exc:
            raise GuardrailConfigError(str(exc)) from None
        return Guardrail(spec.name, spec.action, "request" in spec.on, "response" in spec.on, None, None, redactor)
    if spec.kind == "pii":
        types = spec.types or list(RECOGNIZERS)
        unknown = [t for t in types if t not in RECOGNIZERS]
        if unknown:
            raise GuardrailConfigError(
                f"guardrail {spec.name!r}: unknown pii types {unknown}; known: {', '.join(RECOGNIZERS)}"
            )
        chosen = [(t, *RECOGNIZERS[t]) for t in RECOGNIZERS if t in types]  # the built-in priority order
        scanner = Scanner(chosen, TRIGGERS, CHARSETS, LEADS, SEEDS)
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


_Plan = tuple[tuple[Guardrail, ...], tuple[Guardrail, ...], tuple[Guardrail, ...]]  # all, answer, hooks


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
        self._cache: dict[tuple[str, str | None], _Plan] = {}

    def for_request(self, route: str, key: str | None) -> RequestGuard | None:
        if not self.routes and not self.keys:
            return None
        cache_key = (route, key)
        plan = self._cache.get(cache_key)
        if plan is None:
            names = dict.fromkeys((*self.routes.get(route, ()), *self.keys.get(key or "", ())))
            chosen = tuple(self.by_name[n] for n in names)
            answer = tuple(g for g in chosen if g.response and not g.judges)
            hooks = tuple(g for g in chosen if g.response and g.judges)
            plan = (chosen, answer, hooks)
            if len(self._cache) < 4096:
                self._cache[cache_key] = plan
        return RequestGuard(plan[0], plan[1], plan[2]) if plan[0] else None

    async def aclose(self) -> None:
        """Shutdown: the webhooks' HTTP clients."""
        for g in self.by_name.values():
            if g.webhook is not None:
                await g.webhook.aclose()


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
    answer: tuple[Guardrail, ...] = ()  # on the answer, in ``filter``: the scanning kinds
    hooks: tuple[Guardrail, ...] = ()  # on the answer, in ``filter_async``: the webhooks and presidio
    acted: list[dict[str, Any]] = field(default_factory=list)
    _blocks: dict[int, list[StreamRedactor]] = field(default_factory=dict)  # per block, per guardrail
    _kinds: dict[int, type] = field(default_factory=dict)  # a block's delta type: what its held text goes out as
    _held: dict[str, dict[int, list[str]]] = field(default_factory=dict)  # a judging kind's texts, per block
    _stopped: bool = False

    def _note(self, g: Guardrail, where: str, hits: list[Hit]) -> None:
        """``acted`` gets the hit, kept in config order (request entries first)."""
        _note(self.acted, g, where, hits)
        if len(self.acted) > 1:
            rank = {x.name: i for i, x in enumerate(self.guardrails)}
            self.acted.sort(key=lambda e: (e["where"] != "request", rank.get(e["name"], len(rank))))

    async def check_request_async(self, req: ChatRequest) -> None:
        """Every guardrail on the request, in config order: the scanning kinds inline, presidio's
        analysis off the event loop and each webhook's call awaited."""
        for g in self.guardrails:
            if not g.request:
                continue
            if not g.judges:
                self._scan_request(g, req)
                continue
            texts: list[str] = []

            def collect(text: str, texts: list[str] = texts) -> str:
                texts.append(text)
                return text

            _walk(req, collect)
            verdict, hits = await self._judge(g, texts, "request")
            if verdict.action == "allow":
                continue
            self._note(g, "request", hits)
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

    async def check_inputs(self, texts: list[str]) -> list[str]:
        """An embeddings request's texts (gateway/relay/embeddings.py), as the model would see them:
        the same pass as a chat request's turns (redact, block with the 400, log; the webhooks get
        them as their ``texts``), over the texts as one user turn."""
        if not any(g.request for g in self.guardrails):
            return texts
        box = ChatRequest(model="", messages=[Message("user", [TextPart(t) for t in texts])])
        await self.check_request_async(box)
        return [p.text for p in box.messages[0].content]  # type: ignore[union-attr]

    def refuse_tokens(self) -> GatewayError | None:
        """Token-id inputs cannot be read by a guardrail: a ``redact`` or ``block`` guardrail on the
        request refuses them (fail closed: unread ids could carry what it must stop); ``log`` lets
        them pass."""
        for g in self.guardrails:
            if g.request and g.action != "log":
                return GatewayError(
                    "guardrail_blocked",
                    f"guardrail {g.name!r} cannot read token-id inputs: send the inputs as strings",
                    400,
                    param=g.name,
                )
        return None

    @property
    def on_response(self) -> bool:
        return any(g.response for g in self.guardrails)

    @property
    def redacts(self) -> bool:
        return any(g.action == "redact" for g in self.guardrails)

    # -- the request ---------------------------------------------------------------------------

    def check_request(self, req: ChatRequest) -> None:
        """The scanning kinds over every text the model will see, in place; raises the in-dialect
        400 of a blocking hit (``check_request_async`` is the whole pass, judging kinds included)."""
        for g in self.guardrails:
            if g.request and not g.judges:
                self._scan_request(g, req)

    def _scan_request(self, g: Guardrail, req: ChatRequest) -> None:
        scanner = g.scanner
        assert scanner is not None
        hits: list[Hit] = []

        def apply(text: str) -> str:
            out, found = scanner.redact(text)
            if not found:
                return text
            hits.extend(found)
            if g.action == "block":
                raise _Blocked
            return out if g.action == "redact" else text

        try:
            _walk(req, apply)
        except _Blocked:
            self._note(g, "request", hits)
            raise blocked(g, "request") from None
        if hits:
            self._note(g, "request", hits)

    async def _judge(self, g: Guardrail, texts: list[str], where: str) -> tuple[Verdict, list[Hit]]:
        """A judging kind's verdict on whole texts, and the hits to record when it is not ``allow``.
        presidio: its analysis off the event loop; any entity found is a ``redact`` verdict with
        the redacted texts (the guardrail's action decides what happens); longer than its
        ``timeout_ms`` ends as a webhook that did not answer (``fail``)."""
        if g.webhook is not None:
            return await g.webhook.check(g.name, texts, where), [Hit(0, 0, "webhook")]
        from gateway.guardrails.presidio import PresidioTimeout

        try:
            results = await g.presidio.analyze(texts)
        except PresidioTimeout:
            if g.presidio.fail_open:
                return Verdict("allow"), []
            return Verdict("block", "the guardrail did not finish in time", failed=True), [Hit(0, 0, "timeout")]
        hits = [h for _, found in results for h in found]
        if not hits:
            return Verdict("allow"), []
        return Verdict("redact", texts=[out for out, _ in results]), hits

    # -- the answer ---------------------------------------------------------------------------

    def filter(self, batch: list[Event]) -> list[Event]:
        """The batch as the caller may see it (the scanning kinds and ``presidio``; ``filter_async``
        adds the webhooks). A block ends it with an error, nothing of the match sent.

        The per-delta path is the hot one: one list of redactors per block, fed in order; a delta's
        event is reused with its text replaced (no new object, no per-chunk dict key)."""
        if self._stopped:
            return []
        answer = self.answer
        if not answer:
            return batch
        out: list[Event] = []
        append = out.append
        blocks = self._blocks
        for event in batch:
            kind = type(event)
            if kind is TextDelta or kind is ThinkingDelta:
                text = event.text  # type: ignore[union-attr]
            elif kind is ToolArgsDelta:
                text = event.fragment  # type: ignore[union-attr]
            elif kind is BlockStart and event.item is not None:  # type: ignore[union-attr]
                # an item kept whole (gateway/dialects/items.py): a caller of its dialect gets it
                # verbatim, so its texts are checked here, at once
                if self._check_item(event, out):  # type: ignore[arg-type]
                    return out
                continue
            else:
                if (kind is BlockStop or kind is End or kind is StreamError) and blocks:
                    if self._release(event.index if kind is BlockStop else None, out):  # type: ignore[union-attr]
                        return out
                append(event)
                continue
            index = event.index  # type: ignore[union-attr]
            reds = blocks.get(index)
            if reds is None:
                reds = blocks[index] = [g.open_stream() for g in answer]
                self._kinds[index] = kind
            for red in reds:
                text = red.feed(text)
                if red.hits and self._check(red, out):
                    return out
            if text:
                if kind is ToolArgsDelta:
                    event.fragment = text  # type: ignore[union-attr]
                else:
                    event.text = text  # type: ignore[union-attr]
                append(event)
        return out

    def _check_item(self, start: BlockStart, out: list[Event]) -> bool:
        """A kept item's texts through the scanning guardrails; True when one blocks the answer."""
        item = start.item
        for g in self.guardrails:
            if not g.response or g.scanner is None:
                continue
            hits: list[Hit] = []
            item = _item_texts(item, lambda t, g=g, hits=hits: _redacted(g, t, hits))
            if hits:
                self._note(g, "response", hits)
                if g.action == "block":
                    err = blocked(g, "answer")
                    out.append(StreamError(err.kind, err.message, 400))
                    self._stopped = True
                    return True
        out.append(replace(start, item=item))
        return False

    @property
    def synchronous(self) -> bool:
        """No judging kind (webhook, presidio) looks at the answer: ``filter`` is the whole answer pass."""
        return not self.hooks

    async def filter_async(self, batch: list[Event]) -> list[Event]:
        """``filter``, then each judging guardrail's verdict (webhook, presidio) on the blocks that
        end in the batch."""
        batch = self.filter(batch)
        for g in self.hooks:
            if self._stopped:
                break
            batch = await self._hook_pass(g, batch)
        return batch

    def _release(self, index: int | None, out: list[Event]) -> bool:
        """A block's held text (every block's: ``index`` None, at the end) through the remaining
        guardrails, as one delta of its kind."""
        for i in [index] if index is not None else sorted(self._blocks):
            reds = self._blocks.pop(i, None)
            if reds is None:
                continue
            text = ""
            for red in reds:
                text = red.feed(text) + red.flush() if text else red.flush()
                if red.hits and self._check(red, out):
                    return True
            if text:
                out.append(self._kinds[i](i, text))
        return False

    def _check(self, red: StreamRedactor, out: list[Event]) -> bool:
        g = red.guardrail
        self._note(g, "response", red.hits)
        red.hits.clear()
        if g.action != "block":
            return False
        err = blocked(g, "answer")
        out.append(StreamError(err.kind, err.message, 400))
        self._stopped = True
        return True

    async def _hook_pass(self, g: Guardrail, batch: list[Event]) -> list[Event]:
        """One judging guardrail over the answer. ``redact``/``block``: a block's text is held until
        it ends, then judged (one call for every block ending in the batch: a whole answer is one
        call) and released as the verdict says; ``log``: the text passes at once and is judged at
        its end."""
        held = self._held.setdefault(g.name, {})
        holds = g.action != "log"
        ending: list[int] = []
        out: list[Event] = []
        for event in batch:
            kind = type(event)
            if kind is TextDelta or kind is ThinkingDelta or kind is ToolArgsDelta:
                index = event.index  # type: ignore[union-attr]
                parts = held.get(index)
                if parts is None:
                    parts = held[index] = []
                    self._kinds[index] = kind
                parts.append(event.fragment if kind is ToolArgsDelta else event.text)  # type: ignore[union-attr]
                if holds:
                    continue
            elif kind is BlockStop and event.index in held:  # type: ignore[union-attr]
                ending.append(event.index)  # type: ignore[union-attr]
            elif kind is End or kind is StreamError:
                ending += [i for i in held if i not in ending]
            out.append(event)
        if not ending:
            return out
        texts = ["".join(held.pop(i)) for i in ending]
        verdict, hits = await self._judge(g, texts, "response")
        replaced = texts
        if verdict.action != "allow":
            self._note(g, "response", hits)
            if g.action == "log":
                pass  # recorded; the text went out as it came
            elif verdict.action == "block" or g.action == "block" or verdict.texts is None:
                err = blocked(g, "answer")
                if verdict.reason:
                    err.message = f"{err.message}: {verdict.reason}"
                self._stopped = True
                first = next(k for k, e in enumerate(out) if _ends(e, ending))
                return [*out[:first], StreamError(err.kind, err.message, 400)]
            else:
                replaced = verdict.texts
        if not holds:
            return out
        release = dict(zip(ending, replaced, strict=True))
        final: list[Event] = []
        for event in out:
            if _ends(event, ending):
                for i in [event.index] if type(event) is BlockStop else list(release):
                    text = release.pop(i, "")
                    if text:
                        final.append(self._kinds[i](i, text))
            final.append(event)
        return final


def _ends(event: Event, ending: list[int]) -> bool:
    kind = type(event)
    return (kind is BlockStop and event.index in ending) or kind is End or kind is StreamError  # type: ignore[union-attr]


class _Blocked(Exception):
    pass


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
