"""Each dialect's ``whole.py``: a folded answer rendered as the dialect's whole reply
(``encode_whole``) decodes back (``decode_whole``) to the same answer, for every capture of the
dialect; and a non-object body is a bad gateway, never a crash."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gateway.dialects.base import EncodeContext
from gateway.dialects.registry import MODULES, codec_for
from gateway.events import End
from gateway.framing.sse import SSEDecoder
from gateway.ir import ChatRequest, Thinking
from gateway.reply import ReplyBlock, fold
from tests.support.captures import sse_files
from tests.support.event_contract import check_events

CASES = [(d, p) for d in MODULES for p in sse_files(d)]


def shown(block: ReplyBlock) -> tuple[str, Any, str | None]:
    """A block as compared: tool arguments as the object they spell (whole replies re-serialise
    them; arguments cut off mid-JSON are wrapped as ``{"_raw": ...}`` by design, so not compared;
    an opaque block as its item's type and id: a stream's input deltas are inside the whole item)."""
    if block.kind == "opaque":
        item = block.item or {}
        return block.kind, (item.get("type"), item.get("id")), block.origin
    if block.kind != "tool_call":
        return block.kind, block.text, block.name
    try:
        args = json.loads(block.text or "{}")
    except ValueError:
        args = None
    return block.kind, args if not (isinstance(args, dict) and "_raw" in args) else None, block.name


@pytest.mark.parametrize("dialect,path", CASES, ids=[f"{d}/{p.parent.parent.name}/{p.stem}" for d, p in CASES])
def test_encode_whole_then_decode_whole(dialect: str, path: Path) -> None:
    codec = codec_for(dialect)
    decoder, events = codec.stream_decoder(), []
    for frame in SSEDecoder().feed(path.read_bytes()):
        events += decoder.feed(frame)
    events += decoder.close()
    if not isinstance(events[-1], End):
        pytest.skip("a failed stream has no whole reply to render")
    reply = fold(events)
    request = ChatRequest(model="text", thinking=Thinking(include_thoughts=True))
    try:
        body = codec.encode_whole(reply, EncodeContext(model="text", upstream_dialect=dialect, request=request))
    except NotImplementedError:
        pytest.skip(f"{dialect} is an upstream dialect only: no whole reply to render")
    again = codec.decode_whole(body)
    check_events(again)
    back = fold(again)
    assert [shown(b) for b in back.blocks if b.kind != "redacted_thinking"] == [
        shown(b) for b in reply.blocks if b.kind != "redacted_thinking" and (b.text or b.kind != "text")
    ]
    assert back.end is not None and back.end.raw_reason == (reply.end.raw_reason if reply.end else None)


@pytest.mark.parametrize("dialect", list(MODULES))
def test_decode_whole_error_body(dialect: str) -> None:
    bodies = {
        "anthropic": {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}},
        "openai-chat": {"error": {"message": "busy", "type": "server_error"}},
        "openai-responses": {"status": "failed", "error": {"code": "server_error", "message": "busy"}},
        "gemini": {"error": {"code": 503, "message": "busy", "status": "UNAVAILABLE"}},
        "gemini-interactions": {"status": "failed", "errors": [{"code": "internal", "message": "busy"}]},
    }
    if dialect not in bodies:
        pytest.skip(f"no error body written here for {dialect} (tests/dialects/ has its own)")
    events = codec_for(dialect).decode_whole(bodies[dialect])
    check_events(events)
    assert type(events[-1]).__name__ == "StreamError"
