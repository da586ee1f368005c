"""``model_rename``: the model changes at its place only, and the frame's other bytes stay as sent."""

from __future__ import annotations

import orjson
import pytest

from gateway.dialects.base import ModelPlace
from gateway.relay.model_rename import ModelRenamer

TOP = ModelPlace("model")
GEMINI = ModelPlace("modelVersion")
NESTED = ModelPlace("model", parent="message")

CASES = [
    # (place, frame, expected frame) — byte-exact where a splice is possible
    (
        TOP,
        '{"id":"c","created":1,"model":"text","choices":[{"delta":{"content":"text"}}]}',
        '{"id":"c","created":1,"model":"alias","choices":[{"delta":{"content":"text"}}]}',
    ),
    (
        TOP,
        '{"choices":[],"created":0,"id":"","model":"","object":"","prompt_filter_results":[]}',
        '{"choices":[],"created":0,"id":"","model":"alias","object":"","prompt_filter_results":[]}',
    ),
    (TOP, '{"id":"c","choices":[{"delta":{"content":"\\"model\\":\\"text\\""}}]}', None),  # in a string: not a key
    (
        TOP,
        '{"say \\"model":"text","model":"text"}',
        '{"say \\"model":"text","model":"alias"}',
    ),  # a key ending in \"model is not the key
    (
        GEMINI,
        '{"candidates": [{"content": {"parts": [{"text": "modelVersion"}]}}], "modelVersion": "text", "responseId": "r"}',
        '{"candidates": [{"content": {"parts": [{"text": "modelVersion"}]}}], "modelVersion": "alias", "responseId": "r"}',
    ),
    (
        GEMINI,
        '{"candidates": [{"content": {"parts": [{"functionCall": {"name": "f", "args": {"modelVersion": "text"}}}]}}], "modelVersion": "text", "responseId": "r"}',
        '{"candidates": [{"content": {"parts": [{"functionCall": {"name": "f", "args": {"modelVersion": "text"}}}]}}], "modelVersion": "alias", "responseId": "r"}',
    ),
    (
        GEMINI,
        '{"x": [{"modelVersion": "text"}], "modelVersion": "text", "y": ["}"]}',
        '{"x": [{"modelVersion": "text"}], "modelVersion": "alias", "y": ["}"]}',
    ),  # no cheap proof: parsed
    (
        NESTED,
        '{"type":"message_start","message":{"metadata":{"model":"text"},"model":"text","type":"message"}}',
        '{"type":"message_start","message":{"metadata":{"model":"text"},"model":"alias","type":"message"}}',
    ),
    (NESTED, '{"type":"error","error":{"type":"overloaded_error","message":"text"}}', None),  # no message object
    (NESTED, '{"type":"message_start","message":{"model":"alias"}}', None),  # already the caller's
    (TOP, "[DONE]", None),
]


@pytest.mark.parametrize("place,frame,expected", CASES)
def test_rename(place: ModelPlace, frame: str, expected: str | None) -> None:
    assert ModelRenamer(place, "alias").rename(frame) == (frame if expected is None else expected)


def test_an_escaped_model_name_is_renamed_by_reserialising() -> None:
    frame = '{"type":"message_start","message":{"model":"te\\u0078t","content":[{"model":"text"}]}}'
    got = orjson.loads(ModelRenamer(NESTED, "alias").rename(frame))
    assert got == {"type": "message_start", "message": {"model": "alias", "content": [{"model": "text"}]}}


def test_a_caller_name_that_needs_escaping() -> None:
    got = ModelRenamer(TOP, 'my "model" é').rename('{"id":"c","model":"text","choices":[]}')
    assert orjson.loads(got) == {"id": "c", "model": 'my "model" é', "choices": []}


def test_a_proof_is_reused_only_for_frames_that_repeat_its_text() -> None:
    """One renamer per stream: later frames that share the proven text are spliced at once; any
    frame that differs where the proof looked is proven again."""
    chat = ModelRenamer(TOP, "alias")
    assert (
        chat.rename('{"id":"c","model":"text","choices":[{"delta":{"content":"a"}}]}')
        == '{"id":"c","model":"alias","choices":[{"delta":{"content":"a"}}]}'
    )
    assert (
        chat.rename('{"id":"c","model":"text","choices":[{"delta":{"content":"\\"model\\":\\"text\\""}}]}')
        == '{"id":"c","model":"alias","choices":[{"delta":{"content":"\\"model\\":\\"text\\""}}]}'
    )
    assert chat.rename('{"id":"c","model":"other","choices":[]}') == '{"id":"c","model":"alias","choices":[]}'
    assert chat.rename('{"id":"c","model":"textual","choices":[]}') == '{"id":"c","model":"alias","choices":[]}'
    gemini = ModelRenamer(GEMINI, "alias")
    first = '{"candidates": [{"content": {"parts": [{"text": "a"}]}}], "modelVersion": "text", "responseId": "r"}'
    assert gemini.rename(first) == first.replace('"modelVersion": "text"', '"modelVersion": "alias"')
    escaped_key = '{"candidates": [], "a\\"modelVersion": "text", "responseId": "r"}'  # the key is a"modelVersion
    assert gemini.rename(escaped_key) == escaped_key
    assert gemini.rename(first) == first.replace('"modelVersion": "text"', '"modelVersion": "alias"')
