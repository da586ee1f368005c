"""A stream's final text is the deltas' (issue 30 item 8): a Responses ``.done`` event whose full
text extends the deltas adds the rest; one that disagrees with what was streamed is never spliced
on (no fragment mid-word), and the mismatch is a warning naming the provider."""

from __future__ import annotations

import logging

import orjson
import pytest

from gateway.dialects.common import UPSTREAM
from gateway.dialects.openai_responses import CODEC
from gateway.framing.sse import SSEFrame
from gateway.reply import fold


def frame(kind: str, **data: object) -> SSEFrame:
    return SSEFrame(orjson.dumps({"type": kind, **data}).decode(), kind)


def answer(done_text: str, args_done: str = '{"city": "Paris"}') -> list[SSEFrame]:
    return [
        frame("response.created", response={"id": "resp_1", "model": "text", "status": "in_progress"}),
        frame("response.output_item.added", output_index=0, item={"type": "message", "id": "m1", "content": []}),
        frame("response.content_part.added", output_index=0, content_index=0, part={"type": "output_text", "text": ""}),
        frame("response.output_text.delta", output_index=0, content_index=0, delta="Hello wor"),
        frame("response.output_text.done", output_index=0, content_index=0, text=done_text),
        frame("response.output_item.done", output_index=0, item={"type": "message", "id": "m1", "content": []}),
        frame(
            "response.output_item.added",
            output_index=1,
            item={"type": "function_call", "id": "f1", "call_id": "call_1", "name": "get_weather", "arguments": ""},
        ),
        frame("response.function_call_arguments.delta", output_index=1, delta='{"city": '),
        frame("response.function_call_arguments.done", output_index=1, arguments=args_done),
        frame("response.completed", response={"id": "resp_1", "status": "completed", "output": []}),
    ]


def decode(frames: list[SSEFrame]) -> list:
    decoder = CODEC.stream_decoder()
    token = UPSTREAM.set("vendor-x")
    try:
        return [e for f in frames for e in decoder.feed(f)]
    finally:
        UPSTREAM.reset(token)


def test_a_done_text_that_extends_the_deltas_adds_the_rest(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, "gateway.dialects"):
        reply = fold(decode(answer("Hello world.")))
    assert [b.text for b in reply.blocks] == ["Hello world.", '{"city": "Paris"}']
    assert not [r for r in caplog.records if "vendor-x" in r.getMessage()]


def test_a_done_text_that_disagrees_keeps_what_was_streamed(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, "gateway.dialects"):
        reply = fold(decode(answer("Hi there, world.", args_done='{"town": "Paris"}')))
    # never "Hello wor" + "ld." spliced from another text, nor a fragment of other arguments
    assert [b.text for b in reply.blocks] == ["Hello wor", '{"city": ']
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("vendor-x" in w and "output text" in w for w in warnings)
    assert any("vendor-x" in w and "arguments" in w for w in warnings)
