"""A custom tool's input, decoded while its function call's JSON arguments stream
(gateway/dialects/openai_responses/client_tools.py): whatever the fragments cut."""

from __future__ import annotations

import orjson
import pytest

from gateway.dialects.openai_responses.client_tools import InputStream

ARGUMENTS = [
    orjson.dumps({"input": '*** Begin Patch\n+"text" \\ é 😀\n*** End Patch\n'}).decode(),
    '{"input": "ab\\u00e9\\ud83d\\ude00 c\\"\\\\x\\n"}',  # \u escapes, a surrogate pair
    '{ "input" : "text" }',
]


@pytest.mark.parametrize("step", [1, 2, 3, 5, 7, 1000])
@pytest.mark.parametrize("arguments", ARGUMENTS)
def test_the_input_streams_as_itself_whatever_the_fragments(arguments: str, step: int) -> None:
    stream = InputStream()
    deltas = [stream.feed(arguments[i : i + step]) for i in range(0, len(arguments), step)]
    assert "".join(deltas) == orjson.loads(arguments)["input"] == stream.sent


def test_arguments_of_another_shape_stream_nothing() -> None:
    stream = InputStream()
    assert stream.feed('{"patch": "text", "input": "x"}') == "" and stream.sent == ""
