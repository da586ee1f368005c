"""The ordering contract of ``gateway/events.py``, checked in one place for every decoder test.

``check_events(events)`` asserts what every stream decoder promises its encoders:

* ``MessageStart`` comes first, exactly once; the only stream without one is a failure before the
  stream started (nothing but ``Usage`` and the final ``StreamError``), which the relay turns into
  an HTTP error;
* the stream ends with exactly one ``End`` or ``StreamError``, and nothing follows it;
* each block is ``BlockStart`` → deltas → ``BlockStop`` under one index: an index starts once, a
  delta or a stop names an open block (blocks may interleave);
* after an ``End`` every block is stopped and the indices are exactly 0..n-1 (the block's place in
  the final content); ``usage=True`` also asks for a ``Usage`` before the ``End``.
"""

from __future__ import annotations

from collections.abc import Sequence

from gateway.events import (
    BlockStart,
    BlockStop,
    End,
    Event,
    MessageStart,
    SignatureDelta,
    StreamError,
    TextDelta,
    ThinkingDelta,
    ToolArgsDelta,
    Usage,
)

DELTAS = (TextDelta, ThinkingDelta, ToolArgsDelta, SignatureDelta)


def check_events(events: Sequence[Event], *, usage: bool = False) -> None:
    assert events, "a decoder produced no events at all"
    terminals = [i for i, e in enumerate(events) if isinstance(e, (End, StreamError))]
    assert terminals == [len(events) - 1], f"one End/StreamError, last: at {terminals} of {len(events)}"
    starts = [i for i, e in enumerate(events) if isinstance(e, MessageStart)]
    if not starts:
        assert isinstance(events[-1], StreamError), "only a failure may come without MessageStart"
        assert all(isinstance(e, (Usage, StreamError)) for e in events), "content before MessageStart"
    else:
        assert starts == [0], f"MessageStart must come first, once: at {starts}"
    opened: set[int] = set()
    seen: set[int] = set()
    for event in events:
        if isinstance(event, BlockStart):
            assert event.index not in seen, f"block {event.index} started twice"
            seen.add(event.index)
            opened.add(event.index)
        elif isinstance(event, DELTAS):
            assert event.index in opened, f"{event!r} for a block that is not open"
        elif isinstance(event, BlockStop):
            assert event.index in opened, f"BlockStop({event.index}) for a block that is not open"
            opened.discard(event.index)
    if isinstance(events[-1], End):
        assert not opened, f"blocks {sorted(opened)} still open at End"
        assert sorted(seen) == list(range(len(seen))), f"block indices are not 0..n-1: {sorted(seen)}"
        if usage:
            assert any(isinstance(e, Usage) for e in events), "no Usage before End"
