"""One compiled matcher per guardrail, and the streaming redactor over it.

The patterns of a guardrail are one alternation of named groups, compiled once with the ``regex``
module, whose partial matching says where a match may still be in progress at the end of a
chunk: the redactor releases everything before that point at once and holds back only the rest,
so a value split over any chunk boundaries never reaches the caller and the text around it is
exact. The reference (``Scanner.redact``) is the same loop over the whole text.

The ``pii`` recognizers are cheaper than that per chunk: every value holds a trigger character (a
digit, an ``@``), so a chunk without any is released at once up to the trailing run of characters
a value can start with, no regex engine involved (``StreamRedactor.feed``); only a chunk with one
runs the recognizers of the types whose triggers it holds, over the held text and the new text.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import regex

from gateway.guardrails.pii import Check
from gateway.guardrails.prefix import Prefilter, prefilter

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
        leads: dict[str, str] | None = None,
        seeds: dict[str, tuple[tuple[str, str], ...]] | None = None,
    ) -> None:
        self.types = [t for t, _, _ in patterns]
        # every character a match of the type can hold: with one for each type, a stream holds back
        # the longest trailing run of such characters (str.rstrip, C speed) instead of asking the
        # regex engine for a partial match at every chunk
        self.charsets = (
            [charsets[t] for t in self.types] if charsets and all(t in charsets for t in self.types) else None
        )
        if self.charsets is not None:  # a set inside another never starts an earlier run (the min): left out
            sets = list(dict.fromkeys(frozenset(cs) for cs in self.charsets))
            self.charsets = ["".join(sorted(x)) for x in sets if not any(x < y for y in sets)]
        # per character, the charsets holding it: a text's trailing runs start from its last character
        self.ending: dict[str, tuple[str, ...]] = {}
        for chars in self.charsets or ():
            for c in chars:
                self.ending[c] = (*self.ending.get(c, ()), chars)
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
        self._subsets: dict[tuple[bool, ...], Any] = {}  # by which groups a text has
        # The pre-filter: ``needed`` holds, for each type, the characters of one group of its triggers
        # (every match has one of them; of a type's groups the widest: digits rather than ".:" for an
        # IP, as prose is full of full stops, not of digits). A text without any is matched by no
        # type, which a C-speed scan proves before any recognizer runs: one ``re`` character class
        # for a chunk, ``str.__contains__`` (memchr) per character for a long text, where a class
        # costs ~20 ns a character. Empty: a type without triggers (the ``regex`` kind), whose text
        # always goes to the regex engine.
        self.needed = ""
        # ``leads``, per type, every character a match can hold before its first needed character: in
        # a text without needed characters, a match in progress is a trailing run of its type's leads
        # (an email's local part, "+" of a phone number, "fe80:" of an IPv6 address). ``_lead`` is the
        # widest set, ``_other_leads`` the rest, less any inside another; ``rare`` what the others
        # hold beyond the widest (":" and "("): without it, the widest set's run is the hold.
        self.rare = ""
        self._lead = ""
        self._other_leads: tuple[str, ...] = ()
        self._needed_rx: Callable[..., object] | None = None  # (text[, pos]): the first needed character
        self._prefilter: Callable[[str], re.Match[str] | None] | None = None
        self._firsts: list[frozenset[str]] | None = None
        if triggers and all(triggers.get(t) for t in self.types):
            needed = frozenset(c for t in self.types for c in max(triggers[t], key=len))
            self.needed = "".join(sorted(needed))
            self._needed_rx = re.compile(_char_class(needed)).search
            if leads is not None and all(t in leads for t in self.types):
                sets = list(dict.fromkeys(frozenset(leads[t]) - needed for t in self.types))
                sets = sorted((x for x in sets if x and not any(x < y for y in sets)), key=len, reverse=True)
                if sets:
                    self._lead = "".join(sorted(sets[0]))
                    self._other_leads = tuple("".join(sorted(x)) for x in sets[1:])
                rare = frozenset().union(*sets[1:]) - frozenset(self._lead) if sets else frozenset()
                self.rare = "".join(sorted(rare))
                # a match starts with a character of its type's leads or one of its triggers
                self._firsts = [frozenset(leads[t]) | frozenset("".join(triggers[t])) for t in self.types]
                self._prefilter = re.compile(_char_class(needed | rare)).search
        # ``seeds``, per type, patterns one of which every match holds (a first character's class and
        # the rest), far rarer than a digit. A text with a needed character but no seed holds no match,
        # so a stream releases it up to its trailing run of the charsets (a match in progress) without
        # the recognizers. One stdlib search that starts with a class (the engine skips to a character
        # of it at C speed), then each seed's rest behind a look-behind for its first character.
        # the operator's patterns (no triggers): the literal text each match starts with, where one
        # can be proven (gateway/guardrails/prefix.py)
        self.literal = prefilter([p for _, p, _ in patterns]) if not triggers else None
        self._seed: Callable[[str], re.Match[str] | None] | None = None
        if seeds and self.charsets is not None and all(t in seeds for t in self.types):
            by_first: dict[str, list[str]] = {}  # (one look-behind for the seeds sharing a first class)
            for first, rest in dict.fromkeys(pair for t in self.types for pair in seeds[t]):
                by_first.setdefault(first, []).append(rest)
            rests = "|".join(f"(?<=[{first}])(?:{'|'.join(r)})" for first, r in by_first.items())
            self._seed = re.compile(f"[{''.join(by_first)}](?:{rests})").search

    def may_match(self, text: str) -> bool:
        """False: no type can match anywhere in ``text`` (it lacks every needed character)."""
        if not self.needed:
            return True
        if len(text) < 256:
            return self._needed_rx(text) is not None  # type: ignore[misc]
        return any(map(text.__contains__, self.needed))

    def pattern_for(self, text: str) -> Any:
        """The alternation of the types that can match in ``text`` (None: none can), for a search of
        complete matches (a ``re`` or ``regex`` pattern)."""
        if len(text) < 256:  # a chunk: one pass over its characters per group
            flags = tuple([not chars.isdisjoint(text) for _, chars in self._group_list])
        else:  # a long text: str's ``in`` per character of the group
            flags = tuple([any(c in text for c in g) for g, _ in self._group_list])
        compiled = self._subsets.get(flags, self)  # (self: not compiled yet)
        if compiled is self:
            found = {g: flag for (g, _), flag in zip(self._group_list, flags, strict=True)}
            present = [i for i, groups in self._triggers if all(found[g] for g in groups)]
            compiled = self._compile_subset(present) if present else None
            self._subsets[flags] = compiled
        return compiled

    def _compile_subset(self, present: list[int]) -> Any:
        """With every type's leads known (the built-in recognizers: plain ``re`` syntax), stdlib
        ``re`` behind a look-ahead for the characters a match can start with: each position the
        engine tries costs one character-class test unless a value could start there, where the
        bare alternation (lookbehinds first) costs every alternative's — 3-4x faster per chunk than
        the ``regex`` module. The operator's patterns keep ``regex`` (its syntax, partial matches)."""
        alternation = "|".join(self._alternatives[i] for i in present)
        if self._firsts is None:
            return regex.compile(alternation, regex.V0)
        firsts = frozenset().union(*(self._firsts[i] for i in present))
        return re.compile(f"(?={_char_class(firsts)})(?:{alternation})")

    def _confirmed(self, m: Any) -> Hit | None:
        group = m.lastgroup
        if group is None:
            return None
        kind, check = self._checks[group]
        return Hit(m.start(), m.end(), kind) if check(m.group()) else None

    def redact(self, text: str) -> tuple[str, list[Hit]]:
        """The whole text with each confirmed hit replaced: the same loop as a stream's, in one piece
        (so it is the reference any chunking must equal)."""
        if not self.may_match(text):
            return text, []
        pattern = self.pattern_for(text)
        if pattern is None or pattern.search(text) is None:  # the common case: nothing built
            return text, []
        red = StreamRedactor(self, True)
        return red._scan(text, final=True), red.hits


def _char_class(chars: frozenset[str]) -> str:
    return "[" + "".join(re.escape(c) for c in sorted(chars)) + "]"


def _mark(hit: Hit) -> str:
    return f"[REDACTED:{hit.type}]"


class StreamRedactor:
    """One block's text as it streams: ``feed`` returns what may be released now, ``flush`` the rest.

    ``hits`` collects the confirmed matches; with ``redact`` False they pass unchanged (log, and
    block, whose caller ends the stream at the first hit)."""

    __slots__ = (
        "scanner",
        "redact",
        "guardrail",
        "buffer",
        "context",
        "hits",
        "_prefilter",
        "_needed",
        "_lead",
        "_others",
        "_seed",
    )

    def __init__(self, scanner: Scanner, redact: bool, guardrail: Any = None) -> None:
        self.scanner, self.redact = scanner, redact
        self.guardrail = guardrail  # whose hits these are (the engine's Guardrail)
        self.buffer = ""
        self.context = ""
        self.hits: list[Hit] = []
        self._prefilter, self._needed = scanner._prefilter, scanner._needed_rx
        self._lead, self._others = scanner._lead, scanner._other_leads
        self._seed = scanner._seed

    def feed(self, text: str) -> str:
        s = self.buffer + text if self.buffer else text
        prefilter = self._prefilter
        if prefilter is None:
            literal = self.scanner.literal
            return self._scan(s, final=False) if literal is None else self._by_prefix(s, literal)
        # The common chunk: no character any match needs, so nothing in the held text and the new
        # text can be complete; only the trailing run of characters a match can start with is held
        # (usually the last word), the rest goes at once. No regex engine, no list, no new event.
        scanner = self.scanner
        if len(s) < 256:
            rare = prefilter(s)
            if rare is None:
                hold = len(s.rstrip(self._lead))
            elif rare.group() in scanner.needed:  # (the first hit is a needed one: no second search)
                return self._unseeded(s)
            elif self._needed(s, rare.start()) is None:  # type: ignore[misc]
                hold = min(len(s.rstrip(self._lead)), *[len(s.rstrip(x)) for x in self._others])
            else:
                return self._unseeded(s)
        elif any(map(s.__contains__, scanner.needed)):  # (a long text: memchr per character)
            return self._unseeded(s)
        elif any(map(s.__contains__, scanner.rare)):
            hold = min(len(s.rstrip(self._lead)), *[len(s.rstrip(x)) for x in self._others])
        else:
            hold = len(s.rstrip(self._lead))
        if hold == len(s):
            self.buffer = ""
            released = s
        elif hold:
            released, self.buffer = s[:hold], s[hold:]
        else:
            self.buffer = s
            return ""
        self.context = released if len(released) >= CONTEXT else (self.context + released)[-CONTEXT:]
        return released

    def _unseeded(self, s: str) -> str:
        """``s`` holds a needed character (a digit): without any type's seed in it, no match can be
        complete, so all goes but the earliest trailing run of a type's characters (what ``_scan``
        holds); with one, the recognizers run."""
        seed = self._seed
        if seed is None or seed(s) is not None:
            return self._scan(s, final=False)
        end = hold = len(s)
        for chars in self.scanner.ending.get(s[-1], ()):  # (a set without the last character holds nothing)
            hold = min(hold, len(s.rstrip(chars)))
        while hold < end and s[hold] == " ":  # no match starts with a space
            hold += 1
        if hold == end:
            self.buffer = ""
            released = s
        elif hold:
            released, self.buffer = s[:hold], s[hold:]
        else:
            self.buffer = s
            return ""
        self.context = released if len(released) >= CONTEXT else (self.context + released)[-CONTEXT:]
        return released

    def _by_prefix(self, s: str, literal: Prefilter) -> str:
        """The operator's patterns behind their literal prefixes: a match starts at a whole prefix
        or, in the last ``longest - 1`` characters, at a prefix's first character (one may still be
        arriving). Before the earlier of the two nothing can match: it goes at once, no regex engine;
        from a whole prefix on, the regex engine's partial search decides."""
        end = len(s)
        whole = literal.search(s)
        tail = literal.first(s, max(0, end - literal.longest + 1))
        cut = min(whole.start() if whole is not None else end, tail.start() if tail is not None else end)
        if whole is not None and cut == 0:
            return self._scan(s, final=False)
        released = s[:cut]
        if released:
            self.context = released if cut >= CONTEXT else (self.context + released)[-CONTEXT:]
        if whole is not None:
            return released + self._scan(s[cut:], final=False)
        self.buffer = s[cut:]
        return released

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
        ctx = self.context[-CONTEXT:]  # (a feed keeps a whole released piece: sliced only here)
        s = ctx + text
        pos = len(ctx)
        end = len(s)
        out: list[str] = []
        charsets = self.scanner.charsets
        hold = end
        if not final and charsets is not None:
            # a match still in progress is a run of its type's characters up to the end: hold from
            # the earliest such run; before it, every match is complete and the trigger subset finds it
            hold = min(map(len, map(s.rstrip, charsets)))
            while hold < end and s[hold] == " ":  # no match starts with a space
                hold += 1
            if hold <= pos:  # all of the new text may be a match in progress: nothing to search yet
                self.buffer = text
                return ""
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
            m = None if search is None else search(s, pos) if final else search(s, pos, partial=True)
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
