"""CPU cost of the built-in guardrails (issue 33): ``pii`` on an agent-sized request and its answer.

The request: 20 turns, ~24 KB of text (system, user/assistant turns, tool calls and results), a
few values to redact; CPU time (time.process_time), the best of ``REPEATS`` runs (the machine is
shared: the best run is the code's cost, the others add the neighbours'). The answers: ~6 KB
streamed in 20-character deltas (what providers send), through ``RequestGuard.filter``: prose,
prose with a number in every sentence (the deltas holding a digit take the recognizers' path),
and the same prose through a ``regex`` guardrail. Also the time to first token the redactor
adds: the first delta's trip through it (it releases at once what no match in progress needs).

    PYTHONPATH=. python bench/guardrails_cost.py
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from typing import Any

from gateway.events import BlockStart, BlockStop, Event, TextDelta
from gateway.guardrails.engine import Guardrails
from gateway.ir import ChatRequest, Message, TextPart, ToolCallPart, ToolResultPart
from gateway.settings import Settings

WORDS = (
    "the build failed because the test for the parser expects a trailing newline and the fixture in the "
    "repository does not have one so the assertion compares two strings that differ by a single character "
)


def agent_request() -> ChatRequest:
    body = (WORDS * 8)[:1450]
    messages = []
    for turn in range(20):
        if turn % 4 == 1:
            messages.append(
                Message(
                    "assistant",
                    [TextPart(body[:400]), ToolCallPart(f"call_{turn}", "read_file", '{"path": "src/parser.py"}')],
                )
            )
        elif turn % 4 == 2:
            messages.append(Message("user", [ToolResultPart(f"call_{turn - 1}", [TextPart(body)])]))
        else:
            text = body if turn != 10 else body[:1300] + " mail jane.roe@example.com or call +1 415 555 2671"
            messages.append(Message("user" if turn % 2 == 0 else "assistant", [TextPart(text)]))
    return ChatRequest(model="m", messages=messages, system=[TextPart(WORDS * 4)])


REPEATS = 7


def best(run: Callable[[Any], None], setup: Callable[[], Any] = lambda: None) -> float:
    """The fewest CPU seconds of ``REPEATS`` runs (``setup``, untimed, makes each run's input)."""
    times = []
    for _ in range(REPEATS):
        given = setup()
        t0 = time.process_time()
        run(given)
        times.append(time.process_time() - t0)
    return min(times)


def answer_events(numbers: bool = False) -> list[Event]:
    prose = (WORDS * 30)[:6000]
    if numbers:  # "... in 3 of 12 runs ..." in every sentence-sized stretch (~120 chars)
        prose = "".join(f"{prose[i : i + 110]} in {i % 7} of {i % 97} runs " for i in range(0, len(prose), 110))
    text = prose + " reach me at jane.roe@example.com."
    events: list[Event] = [BlockStart(0, "text")]
    events += [TextDelta(0, text[i : i + 20]) for i in range(0, len(text), 20)]
    events.append(BlockStop(0))
    return events


def main() -> None:
    settings = Settings(
        guardrails=[
            {"name": "pii", "kind": "pii"},
            {"name": "projects", "kind": "regex", "patterns": ["(?i)project\\s+falcon", "TKT-\\d{4}"]},
        ],  # type: ignore[list-item]
        routes=[
            {"model": "*", "provider": "p", "guardrails": ["pii"]},
            {"model": "re", "provider": "p", "guardrails": ["projects"]},
        ],  # type: ignore[list-item]
        providers=[{"name": "p", "dialect": "openai-chat", "base_url": "http://127.0.0.1:9"}],  # type: ignore[list-item]
    )
    guardrails = Guardrails(settings)
    req = agent_request()
    size = sum(len(p.text) for p in req.system) + sum(
        len(getattr(p, "text", "") or getattr(p, "arguments", ""))
        + sum(len(c.text) for c in getattr(p, "content", []) if isinstance(c, TextPart))
        for m in req.messages
        for p in m.content
    )
    n = 300

    def requests(copies: list[ChatRequest]) -> None:
        for r in copies:
            guard = guardrails.for_request("*", None)
            assert guard is not None
            guard.check_request(r)

    request_us = best(requests, lambda: [copy.deepcopy(req) for _ in range(n)]) / n * 1e6
    print(f"request: {len(req.messages)} turns, {size / 1024:.1f} KB of text: {request_us:.0f} µs per request (pii)")

    def per_chunk(route: str, numbers: bool) -> float:
        events = answer_events(numbers)
        deltas = sum(type(e) is TextDelta for e in events)
        runs = 20

        def fresh() -> list[list[Event]]:  # filter rewrites a delta's text in place
            return [[copy.copy(e) for e in events] for _ in range(runs)]

        def stream(answers: list[list[Event]]) -> None:
            for answer in answers:
                guard = guardrails.for_request(route, None)
                assert guard is not None
                for e in answer:
                    guard.filter([e])

        return best(stream, fresh) / runs / deltas * 1e6

    for label, route, numbers in (
        ("prose", "*", False),
        ("prose with a number in every sentence", "*", True),
        ("prose, a regex guardrail", "re", False),
    ):
        print(f"answer ({label}), 20-char deltas: {per_chunk(route, numbers):.2f} µs per streamed chunk")

    first = answer_events()[:2]

    def ttft(_: None) -> None:
        for _ in range(1000):
            guard = guardrails.for_request("*", None)
            assert guard is not None
            guard.filter([first[0], TextDelta(0, "the build failed be")])

    print(f"first delta through the redactor (added time to first token): {best(ttft) / 1000 * 1e6:.1f} µs")


if __name__ == "__main__":
    main()
