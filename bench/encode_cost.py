"""Per-event cost of each dialect's stream encoder: the caller-side half of every translated chunk.

One stream of a thinking block (300 deltas + a signature), a text block (3,000 deltas) and a tool
call (500 argument fragments), then usage and the end, encoded whole; the best of ``--repeat`` runs
(the machine's noise only ever adds). Used to check that the typed dispatch of issue 15
(``type(event) is X``, which mypy narrows) costs nothing against the untyped one it replaced:

    .venv/bin/python bench/encode_cost.py
"""

from __future__ import annotations

import argparse
import functools
import timeit

from gateway.dialects.base import Codec, EncodeContext
from gateway.dialects.registry import available, codec_for
from gateway.events import (
    BlockStart,
    BlockStop,
    End,
    Event,
    MessageStart,
    SignatureDelta,
    TextDelta,
    ThinkingDelta,
    ToolArgsDelta,
    Usage,
)
from gateway.ir import ChatRequest


def stream() -> list[Event]:
    events: list[Event] = [MessageStart("msg_1", "text"), BlockStart(0, "thinking")]
    events += [ThinkingDelta(0, "hmm ")] * 300 + [SignatureDelta(0, "sig"), BlockStop(0), BlockStart(1, "text")]
    events += [TextDelta(1, "hello world ")] * 3000 + [BlockStop(1), BlockStart(2, "tool_call", "call_1", "type")]
    events += [ToolArgsDelta(2, '{"a":"')] + [ToolArgsDelta(2, "xy")] * 498 + [ToolArgsDelta(2, '"}'), BlockStop(2)]
    return [*events, Usage(input=10, output=20), End("tool_use", "tool_use")]


def encode_all(codec: Codec, ctx: EncodeContext, events: list[Event]) -> None:
    encode = codec.stream_encoder(ctx).encode  # a new encoder per stream, as the relay makes one
    for event in events:
        encode(event)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--upstream", default="anthropic", help="the upstream dialect the events came from")
    args = parser.parse_args()
    events = stream()
    req = ChatRequest(model="text")
    for dialect in available():
        run = functools.partial(
            encode_all,
            codec_for(dialect),
            EncodeContext(model="text", upstream_dialect=args.upstream, request=req),
            events,
        )
        best = min(timeit.repeat(run, number=5, repeat=args.repeat)) / 5
        print(f"{dialect:22s} {best / len(events) * 1e9:7.1f} ns/event")


if __name__ == "__main__":
    main()
