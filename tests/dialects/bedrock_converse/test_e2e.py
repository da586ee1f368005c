"""bedrock-converse end to end: official SDK callers → the gateway → a loopback Converse upstream.

The upstream is a real HTTP server on 127.0.0.1 answering ``/model/{id}/converse`` with a JSON
reply and ``/model/{id}/converse-stream`` with the fixtures' events. Until the platform layer's
eventstream framer lands, the stream is sent SSE-framed (``event: <type>`` / ``data: <payload>``),
which the gateway's SSE framer turns into exactly the frames the eventstream framer will hand the
decoder; what is tested is the codec inside the real relay: requests built, answers translated
into each caller's dialect, errors with their status.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote

import anthropic
import openai
import orjson
import pytest

from gateway.server.app import create_app
from gateway.settings import Settings
from tests.support.fake_upstream import ServerThread, read_request

from .conftest import load

MSGS = [{"role": "user", "content": "hi"}]


class ConverseUpstream:
    """The scenario is the model id's last ``--`` part: ``x--text`` streams fixtures/text.json."""

    def __init__(self) -> None:
        self.received: list[tuple[str, dict[str, Any]]] = []  # (raw path, body)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        body = await read_request(scope, receive, send)
        if body is None:
            return
        raw_path = scope["raw_path"].decode()
        self.received.append((raw_path, orjson.loads(body)))
        segment = raw_path.split("/")[2]
        scenario = unquote(segment).rpartition("--")[2]
        if scenario == "http_429":
            await self._send(
                send,
                429,
                b'{"message":"Too many requests, please wait before trying again."}',
                "application/json",
                [(b"x-amzn-errortype", b"ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/")],
            )
        elif raw_path.endswith("/converse"):
            reply = load("whole.tool_call") if scenario == "tool_call" else self._whole_text()
            await self._send(send, 200, orjson.dumps(reply), "application/json")
        else:
            frames = b"".join(
                b"event: %s\ndata: %s\n\n" % (event.encode(), orjson.dumps(payload))
                for event, payload in load(scenario)["frames"]
            )
            await self._send(send, 200, frames, "text/event-stream")

    @staticmethod
    def _whole_text() -> dict[str, Any]:
        return {
            "output": {"message": {"role": "assistant", "content": [{"text": "Hello whole"}]}},
            "stopReason": "end_turn",
            "usage": {"inputTokens": 4, "outputTokens": 2, "totalTokens": 6},
            "metrics": {"latencyMs": 9},
        }

    @staticmethod
    async def _send(
        send: Any, status: int, body: bytes, content_type: str, headers: list[tuple[bytes, bytes]] | None = None
    ) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", content_type.encode()), *(headers or [])],
            }
        )
        await send({"type": "http.response.body", "body": body})


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ConverseUpstream, str]]:
    upstream = ConverseUpstream()
    with ServerThread(upstream) as up:
        db = tmp_path_factory.mktemp("state") / "state.db"
        settings = Settings(
            providers=[{"name": "bedrock", "dialect": "bedrock-converse", "base_url": up.url, "max_retries": 0}],
            store={"url": f"sqlite:///{db}"},
        )
        with ServerThread(create_app(settings)) as gw:
            yield upstream, gw.url


def test_chat_stream_text(gateway: tuple[ConverseUpstream, str]) -> None:
    upstream, url = gateway
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0)
    chunks = list(
        client.chat.completions.create(
            model="bedrock/meta.llama3-3-70b-instruct-v1:0--text",
            messages=MSGS,
            stream=True,
            stream_options={"include_usage": True},
            max_tokens=64,
        )
    )
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Hello! 你好 — text"
    assert chunks[-1].usage.prompt_tokens == 14 and chunks[-1].usage.completion_tokens == 9
    path, body = upstream.received[-1]
    assert path == "/model/meta.llama3-3-70b-instruct-v1%3A0--text/converse-stream"
    assert body == {"messages": [{"role": "user", "content": [{"text": "hi"}]}], "inferenceConfig": {"maxTokens": 64}}


def test_chat_whole_tool_call(gateway: tuple[ConverseUpstream, str]) -> None:
    upstream, url = gateway
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0)
    tools = [
        {
            "type": "function",
            "function": {"name": "type", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}},
        }
    ]
    completion = client.chat.completions.create(model="bedrock/mistral.large--tool_call", messages=MSGS, tools=tools)
    message = completion.choices[0].message
    assert message.content == "Checking."
    # a Chat caller has no thinking blocks: the gateway carries the reasoning signature in the call id
    assert message.tool_calls[0].id.startswith("tooluse_2Hk3") and orjson.loads(
        message.tool_calls[0].function.arguments
    ) == {"city": "Paris"}
    assert completion.choices[0].finish_reason == "tool_calls"
    assert completion.usage.prompt_tokens == 120 and completion.usage.prompt_tokens_details.cached_tokens == 100
    path, body = upstream.received[-1]
    assert path.endswith("/converse") and body["toolConfig"]["tools"][0]["toolSpec"]["name"] == "type"


def test_anthropic_stream_reasoning_signature_round_trips(gateway: tuple[ConverseUpstream, str]) -> None:
    upstream, url = gateway
    client = anthropic.Anthropic(base_url=url, api_key="x", max_retries=0)
    model = "bedrock/us.anthropic.claude-sonnet-4-5-20250929-v1:0--reasoning"
    with client.messages.stream(
        model=model, max_tokens=4096, messages=MSGS, thinking={"type": "enabled", "budget_tokens": 2048}
    ) as stream:
        final = stream.get_final_message()
    kinds = [b.type for b in final.content]
    assert kinds == ["thinking", "redacted_thinking", "text"]
    assert final.content[2].text == "925 ÷ 5 = 185"
    signature = final.content[0].signature
    assert signature.startswith("gw~bedrock-converse~")  # a foreign signature, packed for the way back
    assert upstream.received[-1][1]["additionalModelRequestFields"] == {
        "thinking": {"type": "enabled", "budget_tokens": 2048}
    }
    # the next turn sends the thinking back: it reaches Converse as Converse's own reasoning block
    turn = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in final.content]},
        {"role": "user", "content": "and?"},
    ]
    with client.messages.stream(
        model=model, max_tokens=4096, messages=turn, thinking={"type": "enabled", "budget_tokens": 2048}
    ) as stream:
        stream.get_final_message()
    sent = upstream.received[-1][1]["messages"][1]["content"]
    assert sent[0] == {
        "reasoningContent": {
            "reasoningText": {
                "text": "The user asks for 925 / 5. 5 * 185 = 925.",
                "signature": "EqoBCkgIBxABGAIiQLqU5ddj0uDGmWwYrMnq8e9mM3A6bkJ1xq0gm5dH0Rr1",
            }
        }
    }


def test_exception_mid_stream_reaches_the_caller_as_an_error(gateway: tuple[ConverseUpstream, str]) -> None:
    _, url = gateway
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0)
    with pytest.raises(openai.APIError):
        list(
            client.chat.completions.create(
                model="bedrock/deepseek.r1-v1:0--exception_mid_stream", messages=MSGS, stream=True
            )
        )


def test_throttling_before_the_first_byte_is_a_429(gateway: tuple[ConverseUpstream, str]) -> None:
    _, url = gateway
    client = anthropic.Anthropic(base_url=url, api_key="x", max_retries=0)
    with (
        pytest.raises(anthropic.RateLimitError),
        client.messages.stream(
            model="bedrock/amazon.nova-pro-v1:0--throttled", max_tokens=100, messages=MSGS
        ) as stream,
    ):
        stream.get_final_message()
    chat = openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0)
    with pytest.raises(openai.RateLimitError):
        chat.chat.completions.create(model="bedrock/amazon.nova-pro-v1:0--http_429", messages=MSGS)


def test_chat_tool_loop_sends_converse_blocks_back(gateway: tuple[ConverseUpstream, str]) -> None:
    upstream, url = gateway
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0)
    tools = [
        {
            "type": "function",
            "function": {"name": "type", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}},
        }
    ]
    first = client.chat.completions.create(model="bedrock/mistral.large--tool_call", messages=MSGS, tools=tools)
    call = first.choices[0].message.tool_calls[0]
    turn = [
        *MSGS,
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                {"id": call.id, "type": "function", "function": {"name": "type", "arguments": call.function.arguments}}
            ],
        },
        {"role": "tool", "tool_call_id": call.id, "content": "18C"},
    ]
    client.chat.completions.create(model="bedrock/mistral.large--text", messages=turn, tools=tools)
    messages = upstream.received[-1][1]["messages"]
    assert messages[1]["role"] == "assistant"
    assert {"toolUse": {"toolUseId": "tooluse_2Hk3", "name": "type", "input": {"city": "Paris"}}} in messages[1][
        "content"
    ]
    # the signature came back inside the call id; Converse gets it as its own block, leading the turn
    assert messages[1]["content"][0] == {
        "reasoningContent": {"reasoningText": {"text": "", "signature": "EqoBCkgIBxABGAIiQFx"}}
    }
    assert messages[2] == {
        "role": "user",
        "content": [{"toolResult": {"toolUseId": "tooluse_2Hk3", "content": [{"text": "18C"}]}}],
    }
