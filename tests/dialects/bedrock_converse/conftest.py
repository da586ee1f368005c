"""Shared helpers of the bedrock-converse tests: the fixtures and a decoder run over them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from gateway.dialects.bedrock_converse import CODEC
from gateway.events import Event
from gateway.framing.sse import SSEFrame

FIXTURES = Path(__file__).parent / "fixtures"
STREAMS = sorted(p.stem for p in FIXTURES.glob("*.json") if not p.stem.startswith("whole."))


def load(name: str) -> dict[str, Any]:
    return orjson.loads((FIXTURES / f"{name}.json").read_bytes())


def frames_of(name: str) -> list[SSEFrame]:
    """The fixture's eventstream messages as the platform's framer hands them over."""
    return [SSEFrame(orjson.dumps(payload).decode(), event=event) for event, payload in load(name)["frames"]]


def decode(frames: list[SSEFrame], close: bool = True) -> list[Event]:
    decoder = CODEC.stream_decoder()
    events: list[Event] = []
    for frame in frames:
        events += decoder.feed(frame)
    if close:
        events += decoder.close()
    return events
