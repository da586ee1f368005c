"""The webhook guardrail against a loopback service: allow, block with a reason, redacted texts,
slow (past timeout_ms) and down, fail closed and open — on requests and on answers (whole, and
streamed one character a chunk); the openai and anthropic SDKs as callers. Its HTTP client is
closed when the gateway shuts down."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import orjson
import pytest

from gateway.server.app import create_app
from gateway.settings import Settings
from tests.guardrails.test_guardrails_callers import ChatUpstream
from tests.support.access_log import Capture, capture_access_log
from tests.support.callers import anthropic_client, openai_client
from tests.support.fake_upstream import ServerThread, free_port


class GuardService:
    """Decides by a word in the texts: BLOCK, REDACT (each "secret-123" becomes "[gone]"), SLOW; else allow."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        raw = b""
        while True:
            msg = await receive()
            raw += msg.get("body", b"")
            if not msg.get("more_body"):
                break
        body = orjson.loads(raw)
        self.seen.append(body)
        joined = " ".join(body["texts"])
        if "SLOW" in joined:
            await asyncio.sleep(1.0)
        if "BLOCK" in joined:
            answer: dict[str, Any] = {"action": "block", "reason": "policy 7 forbids this"}
        elif "REDACT" in joined:
            answer = {"action": "redact", "texts": [t.replace("secret-123", "[gone]") for t in body["texts"]]}
        else:
            answer = {"action": "allow"}
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": orjson.dumps(answer)})


class EchoUpstream(ChatUpstream):
    """Answers "you said: <the last user text>" (streamed ``n`` characters a chunk for ``<model>-<n>``)."""

    def answer(self, body: dict[str, Any]) -> str:
        return f"you said: {body['messages'][-1]['content']}"


Setup = tuple[str, EchoUpstream, GuardService, Capture]


@pytest.fixture(scope="module")
def setup() -> Iterator[Setup]:
    up, service = EchoUpstream(), GuardService()
    down = f"http://127.0.0.1:{free_port()}/check"
    with ServerThread(up) as upstream, ServerThread(service) as guard:
        hook = {"kind": "webhook", "action": "redact", "timeout_ms": 200}
        out = {**hook, "on": ["response"]}
        config = {
            "server": {"access_log": True},
            "auth": {"keys_env": ""},
            "store": {"url": "sqlite://:memory:"},
            "providers": [{"name": "up", "dialect": "openai-chat", "base_url": upstream.url + "/v1", "api_key": "k"}],
            "guardrails": [
                {"name": "svc", "url": guard.url + "/check", **hook, "on": ["request"]},
                {"name": "down-closed", "url": down, **hook, "on": ["request"]},
                {"name": "down-open", "url": down, **hook, "fail": "open"},
                {"name": "svc-out", "url": guard.url + "/check", **out},
                {"name": "svc-out-block", "url": guard.url + "/check", **out, "action": "block"},
                {"name": "svc-out-log", "url": guard.url + "/check", **out, "action": "log"},
                {"name": "down-out", "url": down, **out},
                {"name": "svc-both", "url": guard.url + "/check", **hook},
            ],
            "routes": [
                {"model": "svc", "provider": "up", "guardrails": ["svc"]},
                {"model": "closed", "provider": "up", "guardrails": ["down-closed"]},
                {"model": "open", "provider": "up", "guardrails": ["down-open"]},
                {"model": "out-*", "provider": "up", "guardrails": ["svc-out"]},
                {"model": "outblock-*", "provider": "up", "guardrails": ["svc-out-block"]},
                {"model": "outlog-*", "provider": "up", "guardrails": ["svc-out-log"]},
                {"model": "outdown-*", "provider": "up", "guardrails": ["down-out"]},
                {"model": "both", "provider": "up", "guardrails": ["svc-both"]},
            ],
        }
        with capture_access_log() as capture, ServerThread(create_app(Settings(**config))) as gw:
            yield gw.url, up, service, capture


def _ask(url: str, model: str, text: str) -> str:
    reply = openai_client(url).chat.completions.create(
        model=model, messages=[{"role": "system", "content": "be brief"}, {"role": "user", "content": text}]
    )
    return reply.choices[0].message.content or ""


def test_allow_forwards_and_sends_every_text(setup: Setup) -> None:
    url, up, service, _ = setup
    assert _ask(url, "svc", "hello there")
    assert service.seen[-1] == {"guardrail": "svc", "where": "request", "texts": ["be brief", "hello there"]}
    assert up.bodies[-1]["messages"][-1]["content"] == "hello there"


def test_block_is_a_400_with_the_reason_and_nothing_upstream(setup: Setup) -> None:
    url, up, _, _ = setup
    before = len(up.bodies)
    with pytest.raises(openai.BadRequestError) as info:
        _ask(url, "svc", "please BLOCK me")
    assert info.value.code == "guardrail_blocked"
    assert "policy 7" in str(info.value)
    assert len(up.bodies) == before


def test_redact_replaces_the_texts(setup: Setup) -> None:
    url, up, _, _ = setup
    _ask(url, "svc", "REDACT secret-123 now")
    assert up.bodies[-1]["messages"][-1]["content"] == "REDACT [gone] now"


def test_slow_and_down_fail_closed(setup: Setup) -> None:
    url, up, _, _ = setup
    before = len(up.bodies)
    for model, text in (("svc", "SLOW please"), ("closed", "hi")):
        with pytest.raises(openai.BadRequestError) as info:
            _ask(url, model, text)
        assert info.value.code == "guardrail_blocked"
    assert len(up.bodies) == before


def test_down_fail_open_forwards(setup: Setup) -> None:
    url, up, _, _ = setup
    assert _ask(url, "open", "hi")
    assert up.bodies[-1]["messages"][-1]["content"] == "hi"


def _stream_chat(url: str, model: str, text: str) -> tuple[str, Exception | None]:
    got: list[str] = []
    try:
        for c in openai_client(url).chat.completions.create(
            model=model, messages=[{"role": "user", "content": text}], stream=True
        ):
            if c.choices:
                got.append(c.choices[0].delta.content or "")
    except openai.APIError as exc:
        return "".join(got), exc
    return "".join(got), None


def _stream_anthropic(url: str, model: str, text: str) -> str:
    messages: Any = [{"role": "user", "content": text}]
    with anthropic_client(url).messages.stream(model=model, max_tokens=50, messages=messages) as s:
        return "".join(s.text_stream)


@pytest.mark.parametrize("size", [1, 7, 1000])
def test_an_answer_is_redacted_by_the_service_whole_and_streamed(setup: Setup, size: int) -> None:
    url, up, service, capture = setup
    prompt = "REDACT secret-123 now"
    model = f"out-{size}"
    assert _ask(url, model, prompt) == "you said: REDACT [gone] now"
    assert up.bodies[-1]["messages"][-1]["content"] == prompt  # the request is not this guardrail's
    assert service.seen[-1] == {"guardrail": "svc-out", "where": "response", "texts": ["you said: " + prompt]}
    text, err = _stream_chat(url, model, prompt)
    assert (text, err) == ("you said: REDACT [gone] now", None)
    assert service.seen[-1]["texts"] == ["you said: " + prompt]  # one call with the block's whole text
    assert _stream_anthropic(url, model, prompt) == "you said: REDACT [gone] now"
    line = capture.line_where(lambda entry: entry.get("model") == model)
    assert {"name": "svc-out", "action": "redact", "where": "response", "types": ["webhook"]} in line["guardrails"]
    assert "secret-123" not in orjson.dumps(line).decode()


def test_an_allowed_answer_streams_unchanged(setup: Setup) -> None:
    url, _, service, _ = setup
    assert _stream_chat(url, "out-3", "all fine here") == ("you said: all fine here", None)
    assert service.seen[-1]["where"] == "response"


@pytest.mark.parametrize("size", [1, 5])
def test_a_blocked_answer_delivers_nothing_of_it_and_ends_with_an_error(setup: Setup, size: int) -> None:
    url, _, _, capture = setup
    model = f"outblock-{size}"
    text, err = _stream_chat(url, model, "please BLOCK this")
    assert text == "" and err is not None  # the block's text was held until the verdict
    assert "svc-out-block" in str(err) and "policy 7" in str(err)
    with pytest.raises(anthropic.BadRequestError) as info:  # a whole answer: the 400
        anthropic_client(url).messages.create(
            model=model, max_tokens=50, messages=[{"role": "user", "content": "please BLOCK this"}]
        )
    assert "svc-out-block" in str(info.value)
    line = capture.line_where(lambda entry: entry.get("model") == model)
    assert line["error_kind"] == "guardrail_blocked"
    # allow: the held text goes out at the block's end, as it came
    assert _stream_chat(url, model, "nothing to see") == ("you said: nothing to see", None)


def test_log_streams_at_once_and_records_the_verdict(setup: Setup) -> None:
    url, _, service, capture = setup
    assert _stream_chat(url, "outlog-2", "REDACT secret-123") == ("you said: REDACT secret-123", None)
    assert service.seen[-1]["texts"] == ["you said: REDACT secret-123"]
    line = capture.line_where(lambda entry: entry.get("model") == "outlog-2")
    assert line["guardrails"] == [{"name": "svc-out-log", "action": "log", "where": "response", "types": ["webhook"]}]


def test_answers_fail_closed_when_the_service_is_down_or_slow(setup: Setup) -> None:
    url, _, _, _ = setup
    for model, prompt in (("outdown-4", "hi"), ("out-4", "SLOW down")):
        text, err = _stream_chat(url, model, prompt)
        assert text == "" and err is not None and "guardrail" in str(err), model
        with pytest.raises(openai.BadRequestError) as info:
            _ask(url, model, prompt)
        assert info.value.code == "guardrail_blocked"


def test_by_default_both_the_request_and_the_answer_are_checked(setup: Setup) -> None:
    url, up, service, _ = setup
    before = len(service.seen)
    assert _ask(url, "both", "REDACT secret-123") == "you said: REDACT [gone]"
    assert up.bodies[-1]["messages"][-1]["content"] == "REDACT [gone]"
    assert [s["where"] for s in service.seen[before:]] == ["request", "response"]


def test_the_webhook_client_is_closed_at_shutdown() -> None:
    service = GuardService()
    with ServerThread(service) as guard:
        config = {
            "auth": {"keys_env": ""},
            "store": {"url": "sqlite://:memory:"},
            "providers": [{"name": "up", "dialect": "openai-chat", "base_url": guard.url + "/v1", "api_key": "k"}],
            "guardrails": [{"name": "svc", "kind": "webhook", "url": guard.url + "/check", "action": "block"}],
            "routes": [{"model": "*", "provider": "up", "guardrails": ["svc"]}],
        }
        app = create_app(Settings(**config))
        with ServerThread(app) as gw:
            r = httpx.post(
                gw.url + "/v1/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": "BLOCK"}]}
            )
            assert r.status_code == 400
            hook = app.state.gateway.guardrails.by_name["svc"].webhook
            client = hook._client
            assert client is not None and not client.is_closed
        assert client.is_closed and hook._client is None


class _Stub:
    """A webhook stand-in for the answer pass: records the texts, answers a fixed verdict."""

    def __init__(self, verdict: Any) -> None:
        self.verdict = verdict
        self.calls: list[tuple[str, list[str]]] = []

    async def check(self, name: str, texts: list[str], where: str) -> Any:
        self.calls.append((where, texts))
        return self.verdict


def _guard(action: str, verdict: Any) -> Any:
    from gateway.guardrails.engine import Guardrail, RequestGuard

    g = Guardrail("hook", action, False, True, None, _Stub(verdict))  # type: ignore[arg-type]
    return RequestGuard((g,), (), (g,))


def _run(guard: Any, batches: list[list[Any]]) -> list[Any]:
    async def go() -> list[Any]:
        out: list[Any] = []
        for batch in batches:
            out += await guard.filter_async(batch)
        return out

    return asyncio.run(go())


def test_the_answer_pass_holds_each_block_and_judges_the_blocks_that_end_together() -> None:
    from gateway.events import BlockStart, BlockStop, End, TextDelta, ToolArgsDelta
    from gateway.guardrails.webhook import Verdict

    guard = _guard("redact", Verdict("redact", texts=["[text]"]))
    stub = guard.hooks[0].webhook
    out = _run(guard, [[BlockStart(0, "text"), TextDelta(0, "hello "), TextDelta(0, "world")], [BlockStop(0)]])
    assert [type(e) for e in out] == [BlockStart, TextDelta, BlockStop]  # held until the block ended
    assert out[1].text == "[text]" and stub.calls == [("response", ["hello world"])]
    # a block that ends without its BlockStop is judged at the end
    stub.verdict = Verdict("redact", texts=["[args]"])
    out = _run(guard, [[BlockStart(1, "tool_use", "call_1", "f"), ToolArgsDelta(1, '{"a":')], [ToolArgsDelta(1, "1}")]])
    assert [type(e) for e in out] == [BlockStart]
    out = _run(guard, [[End("tool_use")]])
    assert [type(e) for e in out] == [ToolArgsDelta, End]
    assert out[0].fragment == "[args]" and stub.calls[-1] == ("response", ['{"a":1}'])
    # two blocks ending in one read (a whole answer): one call with both texts
    guard = _guard("redact", Verdict("redact", texts=["A", "B"]))
    whole = [BlockStart(0, "text"), TextDelta(0, "a"), BlockStop(0), BlockStart(1, "text"), TextDelta(1, "b")]
    out = _run(guard, [[*whole, BlockStop(1), End("stop")]])
    assert [type(e) for e in out] == [BlockStart, TextDelta, BlockStop, BlockStart, TextDelta, BlockStop, End]
    assert [e.text for e in out if type(e) is TextDelta] == ["A", "B"]
    assert guard.hooks[0].webhook.calls == [("response", ["a", "b"])]


def test_a_blocking_verdict_ends_the_answer_before_the_block() -> None:
    from gateway.events import BlockStart, BlockStop, End, StreamError, TextDelta
    from gateway.guardrails.webhook import Verdict

    guard = _guard("redact", Verdict("block", "no"))
    out = _run(guard, [[BlockStart(0, "text"), TextDelta(0, "x"), BlockStop(0), End("stop")], [TextDelta(0, "late")]])
    assert [type(e) for e in out] == [BlockStart, StreamError]
    assert out[1].kind == "guardrail_blocked" and "no" in out[1].message


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_every_dialects_caller_gets_the_services_answer(setup: Setup, stream: bool) -> None:
    from tests.guardrails.test_guardrails_callers import CALLERS

    url, _, _, _ = setup
    for dialect, call in CALLERS.items():
        assert call(url, f"out-{dialect}-1", "REDACT secret-123", stream) == "you said: REDACT [gone]", dialect
