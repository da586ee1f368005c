"""Input tokens known at the start go out at the start.

An Anthropic upstream states the prompt's usage in ``message_start``, a Gemini upstream on its
first chunk (``usageMetadata.promptTokenCount``). A caller whose dialect has a place for it at the
start gets it there: an Anthropic caller in ``message_start.message.usage`` (LangChain.js's
ChatAnthropic and others read input tokens only there), a Gemini caller on its first chunk.
OpenAI chat, Responses and Interactions upstreams state usage only at the end (the captures), so
their callers see the input count then. Read with the official SDKs through the gateway, over
every upstream dialect.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import UPSTREAM_DIALECTS
from tests.support.callers import SYSTEM, USER, anthropic_client, gemini_client

# The "text" capture: 30 prompt tokens of which 10 were read from the cache.
EARLY = {
    "anthropic": True,
    "gemini": True,
    "openai-chat": False,
    "openai-responses": False,
    "gemini-interactions": False,
}


@pytest.mark.parametrize("upstream", UPSTREAM_DIALECTS)
def test_anthropic_message_start_carries_the_input_tokens(gateway: Any, upstream: str) -> None:
    client = anthropic_client(gateway.url)
    events = list(
        client.messages.create(
            model=f"{upstream}--text",
            max_tokens=100,
            system=SYSTEM,
            messages=[{"role": "user", "content": USER}],
            stream=True,
        )
    )
    start = events[0]
    assert start.type == "message_start"
    usage = start.message.usage
    if EARLY[upstream]:
        assert (usage.input_tokens, usage.cache_read_input_tokens) == (20, 10), f"message_start usage: {usage}"
    else:
        assert usage.input_tokens == 0  # not known yet: the upstream states it at the end
    delta = next(e for e in events if e.type == "message_delta")
    assert (delta.usage.input_tokens, delta.usage.cache_read_input_tokens, delta.usage.output_tokens) == (20, 10, 12)


@pytest.mark.parametrize("upstream", UPSTREAM_DIALECTS)
def test_gemini_first_chunk_carries_the_prompt_tokens(gateway: Any, upstream: str) -> None:
    client = gemini_client(gateway.url)
    chunks = list(client.models.generate_content_stream(model=f"{upstream}--text", contents=USER))
    first = chunks[0].usage_metadata
    if EARLY[upstream]:
        assert first is not None and first.prompt_token_count == 30 and first.cached_content_token_count == 10, (
            f"first chunk: {first}"
        )
    last = chunks[-1].usage_metadata
    assert last is not None and (last.prompt_token_count, last.candidates_token_count) == (30, 12)
