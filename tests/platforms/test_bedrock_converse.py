"""The bedrock-converse dialect on the Bedrock platform: SigV4-signed, eventstream-framed.

The codec's own tests (tests/dialects/bedrock_converse/) feed it SSE-framed events; here the
same fixtures come as Bedrock sends them — eventstream messages from the loopback double, which
verifies the signature — so codec, framer and signer are checked together.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anthropic
import openai
import pytest

pytest.importorskip("botocore")

from gateway.app import create_app  # noqa: E402
from gateway.settings import Settings  # noqa: E402
from tests.platforms.test_bedrock import aws_env  # noqa: E402,F401  (the module's AWS environment)
from tests.support.bedrock_double import BedrockDouble, converse_replay  # noqa: E402
from tests.support.fake_upstream import ServerThread  # noqa: E402

FIXTURES = Path(__file__).resolve().parents[1] / "dialects" / "bedrock_converse" / "fixtures"
MSGS = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def setup(aws_env: None) -> Iterator[tuple[BedrockDouble, str]]:  # noqa: F811
    if not FIXTURES.exists():
        pytest.skip("the bedrock-converse fixtures are not in this checkout")
    double = BedrockDouble(converse_handler=converse_replay(FIXTURES))
    with ServerThread(double) as up:
        provider = {"name": "converse", "dialect": "bedrock-converse", "platform": "bedrock", "region": "us-east-1", "endpoint_url": up.url, "max_retries": 1, "retry_backoff": 0.01}
        settings = Settings(providers=[provider], routes=[{"model": "*", "provider": "converse"}], store={"url": "sqlite://:memory:"}, auth={"keys_env": ""})
        with ServerThread(create_app(settings)) as gw:
            yield double, gw.url


def test_chat_stream_text(setup: tuple[BedrockDouble, str]) -> None:
    double, url = setup
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0)
    chunks = list(client.chat.completions.create(model="meta.llama3-3-70b-instruct-v1:0--text", messages=MSGS, stream=True, stream_options={"include_usage": True}, max_tokens=64))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Hello! 你好 — text"
    seen = double.seen[-1]
    assert seen.auth == "sigv4" and seen.path == "/model/meta.llama3-3-70b-instruct-v1%3A0--text/converse-stream"


def test_anthropic_whole_tool_call(setup: tuple[BedrockDouble, str]) -> None:
    double, url = setup
    client = anthropic.Anthropic(base_url=url, api_key="x", max_retries=0)
    tools = [{"name": "type", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]
    message = client.messages.create(model="mistral.large--tool_call", max_tokens=256, messages=MSGS, tools=tools)
    assert [b.type for b in message.content][-1] == "tool_use" and message.stop_reason == "tool_use"
    assert double.seen[-1].auth == "sigv4" and double.seen[-1].path.endswith("/converse")


def test_an_exception_message_mid_stream_is_an_error(setup: tuple[BedrockDouble, str]) -> None:
    _, url = setup
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0)
    with pytest.raises(openai.APIError):
        for _ in client.chat.completions.create(model="deepseek.r1-v1:0--exception_mid_stream", messages=MSGS, stream=True):
            pass


def test_a_throttling_exception_before_content_is_a_429(setup: tuple[BedrockDouble, str]) -> None:
    _, url = setup
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0)
    with pytest.raises(openai.RateLimitError):
        list(client.chat.completions.create(model="amazon.nova-pro-v1:0--throttled", messages=MSGS, stream=True))
