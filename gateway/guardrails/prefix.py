"""A pre-filter for the operator's ``regex`` patterns, where one can be proven: the literal text
every match starts with.

Each pattern is parsed (stdlib ``re``'s parser: the ``regex`` module's V0 syntax is its superset;
a pattern it cannot parse gets no pre-filter) and each of its alternatives read up to the first
element that is not a plain character (zero-width assertions at the start are stepped over). When
every alternative has such a prefix, a match can start only where one of them occurs whole, or in
the last ``longest - 1`` characters of a streamed text, where a prefix may still be arriving, at a
character a prefix starts with. Case-insensitivity is not decided by the flags: every character of
a prefix stands for every character the ``regex`` module matches it to case-insensitively (its
own answer over all code points), so the pre-filter finds a superset of the matches' starts
whatever flags apply, which is all a pre-filter needs.
"""

from __future__ import annotations

import array
import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import regex

_parser: Any = getattr(re, "_parser", None)  # (stdlib's parser; absent: no pre-filter)
_SKIPPED = ("AT", "ASSERT", "ASSERT_NOT")  # zero-width at a match's start


@dataclass(frozen=True, slots=True)
class Prefilter:
    search: Callable[..., re.Match[str] | None]  # (text[, pos]): the first whole prefix
    first: Callable[..., re.Match[str] | None]  # (text, pos): the first character a prefix starts with
    longest: int  # the longest prefix's length


def prefilter(patterns: list[str]) -> Prefilter | None:
    """The pre-filter of these patterns (an alternation of them), or None when one cannot be proven."""
    prefixes: list[str] = []
    for pattern in patterns:
        found = _prefixes(pattern)
        if not found:
            return None
        prefixes += found
    classes = _variants(frozenset("".join(prefixes)))

    def piece(c: str) -> str:
        alts = classes[c]
        return re.escape(alts) if len(alts) == 1 else "[" + "".join(map(re.escape, sorted(alts))) + "]"

    firsts = frozenset("".join(classes[p[0]] for p in prefixes))
    first = "[" + "".join(map(re.escape, sorted(firsts))) + "]"
    # a class first (the engine skips to one of its characters at C speed), then each prefix's rest
    # behind a look-behind for its first character
    rests = "|".join(f"(?<={piece(p[0])}){''.join(map(piece, p[1:]))}" for p in sorted(set(prefixes)))
    whole = f"{first}(?:{rests})"
    return Prefilter(re.compile(whole).search, re.compile(first).search, max(map(len, prefixes)))


def _prefixes(pattern: str) -> list[str] | None:
    """Each alternative's literal prefix (None: one has none, or the pattern is out of reach)."""
    if _parser is None:
        return None
    try:
        parsed = _parser.parse(pattern)
    except Exception:  # (regex-only syntax)
        return None
    try:
        flags = regex.compile(pattern, regex.V0).flags
    except Exception:
        return None
    if (flags | parsed.state.flags) & (regex.VERBOSE | regex.LOCALE):
        return None  # (verbose: white space the two parsers may read apart; a locale's case rules)
    items = list(parsed)
    branches = items[0][1][1] if len(items) == 1 and str(items[0][0]) == "BRANCH" else [items]
    out = []
    for branch in branches:
        chars = []
        for op, av in branch:
            name = str(op)
            if name == "LITERAL":
                chars.append(chr(av))
            elif name in _SKIPPED and not chars:
                continue
            else:
                break
        if not chars:
            return None
        out.append("".join(chars))
    return out


def _every_character() -> str:  # (4 MB: built for a pass, not kept)
    codes = array.array("I", range(0x110000))
    for surrogate in range(0xD800, 0xE000):  # (not characters a text can decode to)
        codes[surrogate] = 0x20
    return codes.tobytes().decode("utf-32-le")


@functools.cache
def _variants(chars: frozenset[str]) -> dict[str, str]:
    """Per character, every character the ``regex`` module matches it to ignoring case (itself too):
    one pass over every code point for the candidates, then each candidate against each character."""
    flags = regex.IGNORECASE | regex.V0
    group = "[" + "".join(map(regex.escape, sorted(chars))) + "]"
    candidates = set(regex.findall(group, _every_character(), flags=flags))
    return {
        c: "".join(sorted({x for x in candidates if regex.fullmatch(regex.escape(c), x, flags=flags)} | {c}))
        for c in chars
    }
