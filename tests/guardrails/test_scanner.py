"""The recognizers' checks and the streaming redactor: any chunking delivers the reference redaction."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.guardrails.engine import compile_guardrail
from gateway.guardrails.pii import CHARSETS, LEADS, RECOGNIZERS, SEEDS, TRIGGERS
from gateway.guardrails.scanner import Scanner, StreamRedactor
from gateway.settings import GuardrailSettings

SCANNER = Scanner([(t, p, c) for t, (p, c) in RECOGNIZERS.items()], TRIGGERS, CHARSETS, LEADS, SEEDS)  # as the engine
RUNS = Scanner([(t, p, c) for t, (p, c) in RECOGNIZERS.items()], TRIGGERS, CHARSETS)  # no lead-run fast path
PARTIAL = Scanner([(t, p, c) for t, (p, c) in RECOGNIZERS.items()])  # the regex engine's partial matches

VALUES = {
    "email": ["jane.roe@example.com", "a.b+tag@mail.example.co.uk"],
    "phone_number": ["+1 415 555 2671", "+44 20 7946 0958", "(415) 555-2671", "415-555-2671", "+49 30 901820"],
    "credit_card": ["4111 1111 1111 1111", "5500-0000-0000-0004", "378282246310005"],
    "iban": ["GB82 WEST 1234 5698 7654 32", "DE89370400440532013000"],
    "us_ssn": ["123-45-6789", "078-05-1120"],
    "ip_address": ["192.168.10.20", "2001:db8::8a2e:370:7334", "fe80::1"],
}
NOT_PII = [
    "4111 1111 1111 1112",  # Luhn fails
    "GB82 WEST 1234 5698 7654 33",  # mod-97 fails
    "000-12-3456",
    "666-12-3456",
    "900-12-3456",
    "123-00-4567",
    "123-45-0000",
    "999.1.1.1",
    "10:30:00",
    "::",  # valid IPv6, but no digit: no one's address (and every confirmed value holds its triggers)
    "fe::ab",
]


@pytest.mark.parametrize(("kind", "value"), [(k, v) for k, vs in VALUES.items() for v in vs])
def test_each_type_is_found_and_named(kind: str, value: str) -> None:
    out, _ = SCANNER.redact(f"before {value} after.")
    assert out == f"before [REDACTED:{kind}] after.", out


@pytest.mark.parametrize("value", NOT_PII)
def test_checks_turn_down_lookalikes(value: str) -> None:
    text = f"see {value} here"
    assert SCANNER.redact(text)[0] == text


def test_types_select_the_recognizers() -> None:
    g = compile_guardrail(GuardrailSettings(name="cards", kind="pii", types=["credit_card"]))
    out, _ = g.scanner.redact("jane.roe@example.com pays with 4111111111111111")
    assert out == "jane.roe@example.com pays with [REDACTED:credit_card]"


def test_regex_patterns_have_a_name_each() -> None:
    g = compile_guardrail(
        GuardrailSettings(
            name="projects",
            kind="regex",
            patterns=["(?i)project\\s+falcon", {"name": "ticket", "pattern": "TKT-\\d{4}"}],  # type: ignore[list-item]
        )
    )
    out, _ = g.scanner.redact("Project  Falcon ships TKT-1234.")
    assert out == "[REDACTED:projects] ships [REDACTED:ticket]."


def _stream(text: str, cuts: list[int], scanner: Scanner = SCANNER) -> str:
    red = StreamRedactor(scanner, True)
    out, pos = [], 0
    for cut in sorted(set(cuts)):
        out.append(red.feed(text[pos:cut]))
        pos = cut
    out.append(red.feed(text[pos:]))
    out.append(red.flush())
    return "".join(out)


@pytest.mark.parametrize(("kind", "value"), [(k, vs[0]) for k, vs in VALUES.items()])
def test_one_character_per_chunk(kind: str, value: str) -> None:
    text = f"Hello, {value} and bye."
    assert _stream(text, list(range(len(text)))) == f"Hello, [REDACTED:{kind}] and bye."


def test_text_before_a_match_is_released_at_once() -> None:
    red = StreamRedactor(SCANNER, True)
    assert red.feed("The answer is simple. Write to ") == "The answer is simple. Write to "
    assert red.feed("jane.roe@exa") == ""
    assert red.feed("mple.com, thanks") == "[REDACTED:email], "
    assert red.flush() == "thanks"


# digits or a "+" right beside a value make a longer number (a card with one more digit is no card)
FILLER = st.text(alphabet=st.sampled_from("abcdefghij klmnop.,:;!?\n-()@0123456789"), max_size=40).map(
    lambda s: f"x{s}x" if s else s
)
ALL_VALUES = [v for vs in VALUES.values() for v in vs]


@settings(max_examples=300, deadline=None)
@given(
    pieces=st.lists(st.tuples(FILLER, st.sampled_from(ALL_VALUES)), min_size=1, max_size=5),
    tail=FILLER,
    data=st.data(),
)
def test_any_chunking_delivers_the_reference_redaction(
    pieces: list[tuple[str, str]], tail: str, data: st.DataObject
) -> None:
    text = "".join(f"{filler} {value} " for filler, value in pieces) + tail
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=30))
    reference, _ = SCANNER.redact(text)
    assert _stream(text, cuts) == reference
    assert _stream(text, cuts, PARTIAL) == reference
    assert _stream(text, cuts, RUNS) == reference
    for _, value in pieces:
        assert value not in reference or value in tail


def test_prose_is_released_at_once_but_its_last_word() -> None:
    """The pre-filter's path (no digit, no "@"): only a run that may still become a value is held."""
    red = StreamRedactor(SCANNER, True)
    assert red.feed("The build failed, see the log at ") == "The build failed, see the log at "
    assert red.feed("once. Then ask jane") == "once. Then ask "
    assert red.feed(".roe") == ""  # still a possible local part
    assert red.feed(" later (or not): ") == "jane.roe later (or not): "
    assert red.flush() == ""


@settings(max_examples=150, deadline=None)
@given(
    pieces=st.lists(st.tuples(FILLER, st.sampled_from(ALL_VALUES)), min_size=1, max_size=4),
    data=st.data(),
)
def test_the_answer_pass_delivers_the_reference_redaction(pieces: list[tuple[str, str]], data: st.DataObject) -> None:
    """``RequestGuard.filter`` over text deltas in random batches: the caller's text is the reference."""
    from gateway.events import BlockStart, BlockStop, End, TextDelta
    from gateway.guardrails.engine import Guardrails
    from gateway.settings import Settings

    text = "".join(f"{filler} {value} " for filler, value in pieces)
    cuts = sorted(set(data.draw(st.lists(st.integers(1, max(1, len(text) - 1)), max_size=25))))
    bounds = [0, *cuts, len(text)]
    events: list[Any] = [BlockStart(0, "text")]
    events += [TextDelta(0, text[a:b]) for a, b in itertools.pairwise(bounds) if b > a]
    events += [BlockStop(0), End("stop")]
    guard = Guardrails(
        Settings(
            providers=[{"name": "p", "dialect": "openai-chat", "base_url": "http://127.0.0.1:9"}],  # type: ignore[list-item]
            guardrails=[{"name": "pii", "kind": "pii"}],  # type: ignore[list-item]
            routes=[{"model": "*", "provider": "p", "guardrails": ["pii"]}],  # type: ignore[list-item]
        )
    ).for_request("*", None)
    assert guard is not None
    size = data.draw(st.integers(1, 4))
    delivered = []
    for i in range(0, len(events), size):
        delivered += guard.filter(events[i : i + size])
    out = "".join(e.text for e in delivered if type(e) is TextDelta)
    assert out == SCANNER.redact(text)[0]
    assert type(delivered[-1]) is End and type(delivered[-2]) is BlockStop


def test_a_digitless_lookalike_is_the_same_whatever_the_chunks() -> None:
    """``::`` (valid IPv6, no digit) next to a phone number: the same answer whole and cut."""
    text = "x;::;x +1 415 555 2671 "
    reference = SCANNER.redact(text)[0]
    assert reference == "x;::;x [REDACTED:phone_number] "
    for cut in range(1, len(text)):
        assert _stream(text, [cut]) == reference, cut


SEED_TEXT = st.text(alphabet=st.sampled_from("0123456789 -.:+()/@abAFGBZ٣"), max_size=40)


@settings(max_examples=400, deadline=None)
@given(text=SEED_TEXT)
def test_every_match_holds_a_seed_of_its_type(text: str) -> None:
    """The seeds are read off the patterns: each of a recognizer's matches (lookalikes the check turns
    down included) holds one of its type's, so a text without any may skip the recognizers."""
    import re

    for kind, (pattern, _) in RECOGNIZERS.items():
        seed = re.compile("|".join(f"[{first}]{rest}" for first, rest in SEEDS[kind]))
        for start in range(len(text)):
            m = re.compile(pattern).match(text, start)
            if m is not None:
                assert seed.search(m.group()) is not None, (kind, m.group())
    for kind, values in VALUES.items():
        seed = re.compile("|".join(f"[{first}]{rest}" for first, rest in SEEDS[kind]))
        assert all(seed.search(v) for v in values), kind


def test_numbers_in_prose_are_released_without_the_recognizers() -> None:
    """Digits but no seed ("in 3 of 12 runs"): all goes at once but a run that may grow into a value."""
    red = StreamRedactor(SCANNER, True)
    assert red.feed("it failed in 3 of 12 runs, so") == "it failed in 3 of 12 runs, "
    assert red.feed(" call 415 555") == "so call "
    assert red.feed(" 2671 now") == "[REDACTED:phone_number] "
    assert red.flush() == "now"


def test_values_in_other_digits_are_the_same_whatever_the_chunks() -> None:
    """A number in Arabic-Indic digits beside an ASCII one: the stream says what the reference says."""
    text = "call ٤١٥-٥٥٥-٢٦٧١ at 3 pm"
    reference = SCANNER.redact(text)[0]
    for cut in range(1, len(text)):
        assert _stream(text, [cut]) == reference, cut


REGEX_KIND = compile_guardrail(
    GuardrailSettings(
        name="projects",
        kind="regex",
        patterns=["(?i)project\\s+falcon", "TKT-\\d{4}", "(?<![a-z])ab+c|abd", "(?i)kb\\d"],  # type: ignore[list-item]
    )
).scanner
REGEX_FILLER = st.text(alphabet=st.sampled_from("aAbcdeTtkK\u212a-0123 \nprojectPROJECTfalcon"), max_size=30)
REGEX_VALUES = [
    "project falcon",
    "PROJECT\n FALCON",
    "TKT-1234",
    "T\u212aT-1234",
    "abbbc",
    "abd",
    "TKT-12",
    "projec falcon",
    "\u212ab7",
    "KB7",
]


def test_operator_patterns_get_a_literal_prefilter_where_one_is_proven() -> None:
    from gateway.guardrails.prefix import prefilter

    assert REGEX_KIND.literal is not None
    assert prefilter(["(?i)project\\s+falcon", "TKT-\\d{4}"]).longest == 7  # type: ignore[union-attr]
    for unproven in (["a?b"], ["(?x) a b"], ["x|"], ["\\mword"], ["ab", "[0-9]+"], ["(ab)c"]):
        assert prefilter(unproven) is None, unproven


@settings(max_examples=300, deadline=None)
@given(
    pieces=st.lists(st.tuples(REGEX_FILLER, st.sampled_from(REGEX_VALUES)), min_size=1, max_size=5),
    data=st.data(),
)
def test_a_regex_guardrail_delivers_the_reference_redaction_whatever_the_chunks(
    pieces: list[tuple[str, str]], data: st.DataObject
) -> None:
    """The literal-prefix pre-filter (a match starts at a whole prefix, or at a prefix's first
    character near the end) changes nothing a caller sees: any chunking equals the whole text's."""
    assert REGEX_KIND is not None
    text = "".join(f"{filler}{value}" for filler, value in pieces)
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=30))
    assert _stream(text, cuts, REGEX_KIND) == REGEX_KIND.redact(text)[0]


def test_a_longer_prefix_still_arriving_is_held_past_a_shorter_whole_one() -> None:
    from gateway.guardrails.pii import always

    scanner = Scanner([("long", "xabc", always), ("short", "ab", always)])
    red = StreamRedactor(scanner, True)
    assert red.feed("see xab") == "see "  # "ab" is whole, but "xab" may still become "xabc"
    assert red.feed("c now") == "[REDACTED:long] now"
    assert red.flush() == ""
