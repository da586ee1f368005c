"""One compiled matcher per guardrail, and the streaming redactor over it.

The patterns of a guardrail are one alternation of named groups, compiled once with the ``regex``
module, whose partial matching says where a match may still be in progress at the end of a
chunk: the redactor releases everything before that point at once and holds back only the rest,
so a value split over any chunk boundaries never reaches the caller and the text around it is
exact. The reference (``Scanner.redact``) is the same loop over the whole text.
"""

from __future__ import annotations

from dataclasses import dataclass

import regex

from gateway.guardrails.pii import Check

CONTEXT = 16  # released characters kept for the patterns' lookbehinds


@dataclass(slots=True)
class Hit:
    start: int
    end: int
    type: str


class Scanner:
    def __init__(self, patterns: list[tuple[str, str, Check]]) -> None:
        """``patterns``: (type, pattern, check) in priority order."""
        self.types = [t for t, _, _ in patterns]
        self._checks: dict[str, tuple[str, Check]] = {}
        alternatives = []
        for i, (kind, pattern, check) in enumerate(patterns):
            group = f"g{i}"
            self._checks[group] = (kind, check)
            alternatives.append(f"(?P<{group}>{pattern})")
        self.pattern = regex.compile("|".join(alternatives), regex.V0)

    def _confirmed(self, m: regex.Match[str]) -> Hit | None:
        group = m.lastgroup
        if group is None:
            return None
        kind, check = self._checks[group]
        return Hit(m.start(), m.end(), kind) if check(m.group()) else None

    def redact(self, text: str) -> tuple[str, list[Hit]]:
        """The whole text with each confirmed hit replaced: the same loop as a stream's, in one piece
        (so it is the reference any chunking must equal)."""
        if self.pattern.search(text) is None:  # the common case: one pass, nothing built
            return text, []
        red = StreamRedactor(self, True)
        return red._scan(text, final=True), red.hits


def _mark(hit: Hit) -> str:
    return f"[REDACTED:{hit.type}]"


class StreamRedactor:
    """One block's text as it streams: ``feed`` returns what may be released now, ``flush`` the rest.

    ``hits`` collects the confirmed matches; with ``redact`` False they pass unchanged (log, and
    block, whose caller ends the stream at the first hit)."""

    __slots__ = ("scanner", "redact", "buffer", "context", "hits")

    def __init__(self, scanner: Scanner, redact: bool) -> None:
        self.scanner, self.redact = scanner, redact
        self.buffer = ""
        self.context = ""
        self.hits: list[Hit] = []

    def feed(self, text: str) -> str:
        return self._scan(self.buffer + text, final=False)

    def flush(self) -> str:
        return self._scan(self.buffer, final=True) if self.buffer else ""

    def _in_progress(self, s: str, pos: int, start: int) -> int | None:
        """Where, at or before the full match at ``start``, a match may still be in progress at the
        end of ``s``. (A partial search prefers a later full match to an earlier partial one.)"""
        fullmatch = self.scanner.pattern.fullmatch
        for i in range(pos, start + 1):
            if fullmatch(s, i, partial=True) is not None:
                return i
        return None

    def _scan(self, text: str, final: bool) -> str:
        ctx = self.context
        s = ctx + text
        pos = len(ctx)
        end = len(s)
        out: list[str] = []
        search = self.scanner.pattern.search
        while pos < end:
            m = search(s, pos, partial=not final)
            if m is None:
                out.append(s[pos:])
                pos = end
                break
            if not final:
                held = m.start() if m.partial else self._in_progress(s, pos, m.start())
                if held is not None:  # the text from there may still be (or grow into) a match: hold it
                    out.append(s[pos:held])
                    pos = held
                    break
            out.append(s[pos : m.start()])
            hit = self.scanner._confirmed(m)
            if hit is not None:
                self.hits.append(hit)
                out.append(_mark(hit) if self.redact else m.group())
                pos = m.end() if m.end() > m.start() else m.start() + 1
            else:  # a lookalike the check turned down: a real value may start inside it
                out.append(s[m.start()])
                pos = m.start() + 1
        self.buffer = s[pos:]
        released = s[len(ctx) : pos]
        self.context = (ctx + released)[-CONTEXT:] if released else ctx
        return "".join(out)
