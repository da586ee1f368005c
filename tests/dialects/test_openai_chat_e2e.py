"""openai-chat end to end: the official SDK → the gateway → a fake OpenAI-chat upstream replaying captures."""

from __future__ import annotations

from collections.abc import Iterator

import openai
import orjson
import pytest

from gateway.server.app import create_app
from gateway.settings import Settings
from tests.support.fake_upstream import FakeUpstream, ServerThread

MSGS = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[FakeUpstream, openai.OpenAI]]:
    fake = FakeUpstream()
    with ServerThread(fake) as up:
        db = tmp_path_factory.mktemp("state") / "state.db"
        settings = Settings(
            providers=[
                {
                    "name": "fake",
                    "dialect": "openai-chat",
                    "base_url": f"http://127.0.0.1:{up.port}/v1",
                    "api_key": "sk-up",
                    "max_retries": 0,
                }
            ],
            store={"url": f"sqlite:///{db}"},
        )
        with ServerThread(create_app(settings)) as gw:
            client = openai.OpenAI(base_url=f"http://127.0.0.1:{gw.port}/v1", api_key="x", max_retries=0)
            yield fake, client


def test_stream_text(servers) -> None:
    fake, client = servers
    chunks = list(
        client.chat.completions.create(
            model="fake/gpt--text", messages=MSGS, stream=True, stream_options={"include_usage": True}
        )
    )
    assert (
        "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Hello from the gateway. 你好 — ok!"
    )
    assert chunks[-1].usage.prompt_tokens == 30 and chunks[-1].usage.prompt_tokens_details.cached_tokens == 10
    assert all(c.model == "fake/gpt--text" for c in chunks)
    sent = fake.last("openai-chat").body
    assert sent["model"] == "gpt--text" and sent["stream"] is True and sent["stream_options"] == {"include_usage": True}


def test_stream_helper_tool_call(servers) -> None:
    _, client = servers
    with client.chat.completions.stream(model="fake/gpt--tool_call", messages=MSGS) as stream:
        final = stream.get_final_completion()
    msg = final.choices[0].message
    assert msg.content == "Let me check."
    assert msg.tool_calls[0].id == "call_weather_1"
    assert orjson.loads(msg.tool_calls[0].function.arguments) == {"city": "Paris", "unit": "celsius"}
    assert final.choices[0].finish_reason == "tool_calls"


def test_whole_parallel(servers) -> None:
    _, client = servers
    completion = client.chat.completions.create(model="fake/gpt--parallel_tool_calls", messages=MSGS)
    assert [t.id for t in completion.choices[0].message.tool_calls] == ["call_p1", "call_p2"]
    assert completion.usage.prompt_tokens == 60 and completion.usage.completion_tokens == 30


def test_truncation_reaches_the_sdk_as_an_error(servers) -> None:
    # (error_mid_stream is covered in test_openai_chat_encode: the fake upstream reads every
    # ``error_*`` scenario as an HTTP status)
    _, client = servers
    with pytest.raises(openai.APIError):
        list(client.chat.completions.create(model="fake/gpt--no_terminator", messages=MSGS, stream=True))


def test_upstream_http_errors(servers) -> None:
    _, client = servers
    with pytest.raises(openai.RateLimitError) as info:
        client.chat.completions.create(model="fake/gpt--error_429", messages=MSGS)
    assert info.value.type == "requests"
    with pytest.raises(openai.InternalServerError) as info2:
        client.chat.completions.create(model="fake/gpt--error_500", messages=MSGS)
    assert info2.value.type == "server_error"


def test_bad_request(servers) -> None:
    _, client = servers
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="fake/gpt", messages=MSGS, n=2)
    assert info.value.param == "n"
