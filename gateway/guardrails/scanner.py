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
    """``patterns``: (type, pattern, check) in priority order; ``triggers``: per type, a character
    every match of it contains (``@`` for an email). One alternation is much slower than its parts,
    so a text is scanned with the alternation of only the types whose trigger it holds: the same
    matches (a type without its trigger cannot match), at a fraction of the cost."""

    def __init__(
        self,
        patterns: list[tuple[str, str, Check]],
        triggers: dict[str, tuple[str, ...]] | None = None,
        charsets: dict[str, str] | None = None,
    ) -> None:
        self.types = [t for t, _, _ in patterns]
        # every character a match of the type can hold: with one for each type, a stream holds back
        # the longest trailing run of such characters (str.rstrip, C speed) instead of asking the
        # regex engine for a partial match at every chunk
        self.charsets = (
            [charsets[t] for t in self.types] if charsets and all(t in charsets for t in self.types) else None
        )
        self._checks: dict[str, tuple[str, Check]] = {}
        self._alternatives: list[str] = []
        self._triggers: list[tuple[int, tuple[str, ...]]] = []
        self._groups: dict[str, frozenset[str]] = {}
        for i, (kind, pattern, check) in enumerate(patterns):
            group = f"g{i}"
            self._checks[group] = (kind, check)
            self._alternatives.append(f"(?P<{group}>{pattern})")
            trigger = (triggers or {}).get(kind)
            self._triggers.append((i, trigger or ()))
            self._groups.update((g, frozenset(g)) for g in trigger or ())
        self.pattern = regex.compile("|".join(self._alternatives), regex.V0)
        self._group_list = list(self._groups.items())
        self._subsets: dict[tuple[bool, ...], regex.Pattern[str] | None] = {}  # by which groups a text has

    def pattern_for(self, text: str) -> regex.Pattern[str] | None:
        """The alternation of the types that can match in ``text`` (None: none can)."""
        if len(text) < 256:  # a chunk: one pass over its characters per group
            flags = tuple([not chars.isdisjoint(text) for _, chars in self._group_list])
        else:  # a long text: str's ``in`` per character of the group
            flags = tuple([any(c in text for c in g) for g, _ in self._group_list])
        compiled = self._subsets.get(flags, self)  # (self: not compiled yet)
        if compiled is self:
            found = {g: flag for (g, _), flag in zip(self._group_list, flags, strict=True)}
            present = [i for i, groups in self._triggers if all(found[g] for g in groups)]
            compiled = regex.compile("|".join(self._alternatives[i] for i in present), regex.V0) if present else None
            self._subsets[flags] = compiled
        return compiled  # type: ignore[return-value]

    def _confirmed(self, m: regex.Match[str]) -> Hit | None:
        group = m.lastgroup
        if group is None:
            return None
        kind, check = self._checks[group]
        return Hit(m.start(), m.end(), kind) if check(m.group()) else None

    def redact(self, text: str) -> tuple[str, list[Hit]]:
        """The whole text with each confirmed hit replaced: the same loop as a stream's, in one piece
        (so it is the reference any chunking must equal)."""
        pattern = self.pattern_for(text)
        if pattern is None or pattern.search(text) is None:  # the common case: nothing built
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
        charsets = self.scanner.charsets
        hold = end
        if not final and charsets is not None:
            # a match still in progress is a run of its type's characters up to the end: hold from
            # the earliest such run; before it, every match is complete and the trigger subset finds it
            hold = min(len(s.rstrip(cs)) for cs in charsets)
            while hold < end and s[hold] == " ":  # no match starts with a space
                hold += 1
            hold = max(pos, hold)
            final = True
        # a final scan needs only the types whose trigger the text holds; a partial one must also see
        # a match in progress whose trigger has not arrived yet ("jane.roe" before its "@")
        pattern = self.scanner.pattern_for(s) if final else self.scanner.pattern
        if pattern is None and hold == end:  # nothing in the text can start a match: all of it goes now
            self.buffer = ""
            self.context = s[-CONTEXT:]
            return text
        search = pattern.search if pattern is not None else None
        while pos < end:
            m = search(s, pos, partial=not final) if search is not None else None
            if m is None or m.start() >= hold:
                out.append(s[pos:hold])
                pos = hold
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
            hold = max(hold, pos)
        self.buffer = s[pos:]
        released = s[len(ctx) : pos]
        self.context = (ctx + released)[-CONTEXT:] if released else ctx
        return "".join(out)
