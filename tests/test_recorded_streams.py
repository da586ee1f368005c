"""Classes of live traffic the conformance matrix did not cover (issue 30), written from the
providers' documented shapes into ``captures/<dialect>/``, through every caller SDK × stream/whole.

* ``anthropic/ptc_message_start``: programmatic tool calling puts the ``tool_use`` block inside
  ``message_start.message.content`` (no ``content_block_start`` of its own): every caller gets
  the tool call and a tool-use stop.
* ``openai-responses/namespace_call``: tool search answers a ``function_call`` with a
  ``namespace``; the caller declared ``get_weather`` and gets ``get_weather``, never
  ``get_weather__get_weather``.
* ``anthropic/refusal``: ``stop_reason: "refusal"`` with no content; no caller gets a clean,
  empty success: Chat ``content_filter`` (and the message's ``refusal``), Responses
  ``incomplete`` (``content_filter``), Gemini ``SAFETY``, Interactions ``incomplete``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest

from gateway.dialects import registry
from gateway.server.app import create_app
from gateway.settings import Settings
from tests.conftest import gateway_config
from tests.support.callers import CALLERS, USER
from tests.support.fake_upstream import FakeUpstream, ServerThread

CALLER_DIALECTS = registry.caller_dialects()
TOOL_STOP = {
    "anthropic": "tool_use",
    "openai-chat": "tool_calls",
    "openai-responses": "completed",
    "gemini": "STOP",
    "gemini-interactions": "requires_action",
}
REFUSAL_STOP = {
    "anthropic": "refusal",
    "openai-chat": "content_filter",
    "openai-responses": "incomplete:content_filter",
    "gemini": "SAFETY",
    "gemini-interactions": "incomplete",
}


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with (
        ServerThread(FakeUpstream()) as upstream,
        ServerThread(create_app(Settings(**gateway_config(upstream.url)))) as server,
    ):
        yield server.url


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize("caller", CALLER_DIALECTS)
def test_tool_use_inside_message_start(url: str, caller: str, stream: bool) -> None:
    out = CALLERS[caller](url, "anthropic--ptc_message_start", "tool_call", stream)
    assert out.tools == [("get_weather", {"city": "Paris"})]
    assert out.stop == TOOL_STOP[caller]
    assert all(out.tool_ids)


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize("caller", CALLER_DIALECTS)
def test_a_namespaced_call_reaches_the_caller_as_the_tool_it_declared(url: str, caller: str, stream: bool) -> None:
    out = CALLERS[caller](url, "openai-responses--namespace_call", "tool_call", stream)
    assert out.tools == [("get_weather", {"city": "Paris"})]
    assert out.stop == TOOL_STOP[caller]


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize("caller", CALLER_DIALECTS)
def test_a_refusal_is_never_a_clean_empty_success(url: str, caller: str, stream: bool) -> None:
    out = CALLERS[caller](url, "anthropic--refusal", "text", stream)
    assert out.stop == REFUSAL_STOP[caller]
    assert out.tools == []


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_a_chat_caller_reads_the_refusal_in_the_message(url: str, stream: bool) -> None:
    client = openai.OpenAI(base_url=url + "/v1", api_key="sk-caller", max_retries=0, timeout=20)
    messages: Any = [{"role": "user", "content": USER}]
    if stream:
        # (the SDK's stream() helper raises ContentFilterFinishReasonError here: the raw chunks)
        refusal, content = "", ""
        for chunk in client.chat.completions.create(model="anthropic--refusal", messages=messages, stream=True):
            for choice in chunk.choices:
                refusal += choice.delta.refusal or ""
                content += choice.delta.content or ""
    else:
        message = client.chat.completions.create(model="anthropic--refusal", messages=messages).choices[0].message
        refusal, content = message.refusal or "", message.content or ""
    assert refusal  # said in the message, not only by the finish reason
    assert not content
