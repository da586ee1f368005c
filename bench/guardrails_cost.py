"""CPU cost of the built-in guardrails (issue 33): ``pii`` on an agent-sized request and its answer.

The request: 20 turns, ~30 KB of text (system, user/assistant turns, tool calls and results), a
few values to redact; CPU time (time.process_time). The answer: ~6 KB streamed in ~20-character deltas (what providers send),
through ``RequestGuard.filter``. Also the time to first token the redactor adds: the first delta's
hold-back (it releases at once what no match in progress needs).

    python bench/guardrails_cost.py
"""

from __future__ import annotations

import copy
import time

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


def answer_events() -> list[Event]:
    text = (WORDS * 30)[:6000] + " reach me at jane.roe@example.com."
    events: list[Event] = [BlockStart(0, "text")]
    events += [TextDelta(0, text[i : i + 20]) for i in range(0, len(text), 20)]
    events.append(BlockStop(0))
    return events


def main() -> None:
    settings = Settings(
        guardrails=[{"name": "pii", "kind": "pii"}],  # type: ignore[list-item]
        routes=[{"model": "*", "provider": "p", "guardrails": ["pii"]}],  # type: ignore[list-item]
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
    copies = [copy.deepcopy(req) for _ in range(n)]
    t0 = time.process_time()
    for r in copies:
        guard = guardrails.for_request("*", None)
        assert guard is not None
        guard.check_request(r)
    request_us = (time.process_time() - t0) / n * 1e6
    events = answer_events()
    deltas = sum(type(e) is TextDelta for e in events)
    t0 = time.process_time()
    for _ in range(50):
        guard = guardrails.for_request("*", None)
        assert guard is not None
        for e in events:
            guard.filter([e])
    chunk_us = (time.process_time() - t0) / 50 / deltas * 1e6
    t0 = time.process_time()
    for _ in range(1000):
        guard = guardrails.for_request("*", None)
        assert guard is not None
        guard.filter([events[0], events[1]])
    ttft_us = (time.process_time() - t0) / 1000 * 1e6
    print(f"request: {len(req.messages)} turns, {size / 1024:.1f} KB of text: {request_us:.0f} µs per request (pii)")
    print(f"answer: {deltas} deltas of 20 chars: {chunk_us:.2f} µs per streamed chunk")
    print(f"first delta through the redactor (added time to first token): {ttft_us:.1f} µs")


if __name__ == "__main__":
    main()
