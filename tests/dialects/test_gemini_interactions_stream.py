"""gemini-interactions: decode the authored captures, encode events, and feed the encoded bytes to
the official google-genai SDK (``client.interactions``) through a real loopback HTTP server."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import orjson
import pytest

from gateway.dialects import signatures
from gateway.dialects.base import EncodeContext
from gateway.dialects.gemini_interactions import CODEC, event_id_for, parse_event_id
from gateway.events import BlockStart, End, MessageStart, StreamError, TextDelta, Usage
from gateway.framing.sse import SSEDecoder
from gateway.ir import ChatRequest, Thinking
from gateway.reply import fold

ROOT = Path(__file__).resolve().parents[2]
CAPTURES = ROOT / "captures" / "gemini-interactions"
PUBLIC = Path(__file__).resolve().parents[3] / "shared" / "captures-public" / "gemini-interactions"


def decode_bytes(body: bytes, chunk: int = 7) -> list:
    sse, dec, events = SSEDecoder(), CODEC.stream_decoder(), []
    for i in range(0, len(body), chunk):
        for frame in sse.feed(body[i : i + chunk]):
            events.extend(dec.feed(frame))
    sse.close()
    events.extend(dec.close())
    return events


def decode_file(name: str) -> list:
    return decode_bytes((CAPTURES / f"{name}.sse").read_bytes())


def ctx(upstream: str = "gemini-interactions", model: str = "my-model", **req) -> EncodeContext:
    return EncodeContext(model=model, upstream_dialect=upstream, request=ChatRequest(model=model, **req))


def encode(events: list, c: EncodeContext, **kw) -> bytes:
    enc = CODEC.stream_encoder(c, **kw)
    return b"".join(enc.encode(e) for e in events)


# --------------------------------------------------------------------------- decode captures


def _calls(reply):
    return [(b.id, b.name, json.loads(b.arguments)) for b in reply.blocks if b.kind == "tool_call"]


def test_text():
    events = decode_file("text")
    assert isinstance(events[0], MessageStart) and events[0].model == "gemini-3-flash-preview"
    assert events[0].id.startswith("v1_")
    r = fold(events)
    assert r.text == "Hello from the gateway. 你好 — ok!"
    assert sum(isinstance(e, TextDelta) for e in events) >= 3
    assert r.end == End("stop", "completed")
    assert (r.usage.input, r.usage.cache_read, r.usage.output) == (30, 10, 12)
    assert isinstance(events[-1], End) and isinstance(events[-2], Usage)


def test_tool_call():
    r = fold(decode_file("tool_call"))
    assert r.blocks[0].kind == "text" and r.blocks[0].text == "Let me check."
    assert _calls(r) == [("call_weather_1", "get_weather", {"city": "Paris", "unit": "celsius"})]
    assert r.end.reason == "tool_use" and r.end.raw_reason == "requires_action"
    assert (r.usage.input, r.usage.cache_read, r.usage.output) == (50, 0, 20)


def test_parallel_tool_calls():
    r = fold(decode_file("parallel_tool_calls"))
    assert r.text == ""
    assert _calls(r) == [
        ("call_p1", "get_weather", {"city": "Paris"}),
        ("call_p2", "get_time", {"timezone": "Europe/Paris"}),
    ]
    assert r.end.reason == "tool_use"
    assert (r.usage.input, r.usage.output) == (60, 30)


def test_tool_result_turn_and_max_tokens_and_long():
    r = fold(decode_file("tool_result_turn"))
    assert r.text == "It is 18°C in Paris." and r.end.reason == "stop" and (r.usage.input, r.usage.output) == (80, 10)
    r = fold(decode_file("max_tokens"))
    assert r.text == "The answer is cut" and r.end == End("length", "incomplete") and r.usage.output == 16
    events = decode_file("long_500")
    assert sum(isinstance(e, TextDelta) for e in events) == 500
    r = fold(events)
    assert r.text == "".join(f"w{i} " for i in range(500)) and r.usage.output == 500 and r.end.reason == "stop"


def test_thinking():
    events = decode_file("thinking")
    r = fold(events)
    assert r.blocks[0].kind == "thinking"
    assert r.blocks[0].text == "The user wants a greeting. I will say hi."
    assert r.blocks[0].signature == "c2lnLWFiYzEyMw=="
    assert r.blocks[1].kind == "text" and r.blocks[1].text == "Hi there!"
    assert (r.usage.input, r.usage.output, r.usage.reasoning) == (30, 40, 25)
    assert r.end.reason == "stop"


def test_error_mid_stream():
    events = decode_file("error_mid_stream")
    r = fold(events)
    assert r.text == "Partial" and r.end is None
    err = events[-1]
    assert isinstance(err, StreamError)
    assert (err.kind, err.status, err.raw, err.message) == (
        "overloaded",
        503,
        "unavailable",
        "The model is overloaded.",
    )


@pytest.mark.parametrize("name", ["cut_mid_event", "no_terminator"])
def test_truncations(name):
    events = decode_file(name)
    assert isinstance(events[-1], StreamError) and events[-1].kind == "truncated"
    assert not any(isinstance(e, End) for e in events)


def test_completed_without_done_is_complete():
    body = (CAPTURES / "text.sse").read_bytes().replace(b"event: done\ndata: [DONE]\n\n", b"")
    events = decode_bytes(body)
    assert events[-1] == End("stop", "completed")


def test_end_only_at_done():
    body = (CAPTURES / "text.sse").read_bytes()
    sse, dec = SSEDecoder(), CODEC.stream_decoder()
    frames = sse.feed(body)
    per = [dec.feed(f) for f in frames]
    assert not any(isinstance(e, End) for e in per[-2])  # interaction.completed: Usage, End held
    assert any(isinstance(e, Usage) for e in per[-2])
    assert per[-1] == [End("stop", "completed")]
    assert dec.close() == []


def test_unknown_and_malformed():
    dec = CODEC.stream_decoder()
    from gateway.framing.sse import SSEFrame

    assert isinstance(
        dec.feed(
            SSEFrame(
                '{"event_type":"interaction.created","interaction":{"id":"v1_x","status":"in_progress"}}',
                "interaction.created",
            )
        )[0],
        MessageStart,
    )
    assert dec.feed(SSEFrame('{"event_type":"step.future","x":1}', "step.future")) == []
    assert (
        dec.feed(SSEFrame('{"event_type":"step.start","index":0,"step":{"type":"google_search_call","id":"s"}}')) == []
    )
    assert dec.feed(SSEFrame('{"event_type":"step.delta","index":0,"delta":{"type":"image","data":"AA=="}}')) == []
    out = dec.feed(SSEFrame("{not json"))
    assert isinstance(out[0], StreamError) and out[0].kind == "bad_gateway"


def test_failed_and_cancelled_statuses():
    from gateway.framing.sse import SSEFrame

    for status, kind in (("failed", "api_error"), ("cancelled", "cancelled")):
        dec = CODEC.stream_decoder()
        payload = {"event_type": "interaction.completed", "interaction": {"id": "v1_x", "status": status}}
        out = dec.feed(SSEFrame(orjson.dumps(payload).decode()))
        assert isinstance(out[-1], StreamError) and out[-1].kind == kind
        assert dec.close() == []


def test_public_captures_if_any():
    if not PUBLIC.is_dir():
        pytest.skip("no public gemini-interactions captures")
    for path in PUBLIC.glob("*.sse"):
        events = decode_bytes(path.read_bytes())
        assert isinstance(events[0], MessageStart)
        assert isinstance(events[-1], (End, StreamError))


# --------------------------------------------------------------------------- encoder


def test_event_ids_every_event_and_parse_back():
    events = decode_file("thinking")
    body = encode(events, ctx(), interaction_id="v1_store1", start=5)
    frames = SSEDecoder().feed(body)
    assert frames[-1].event == "done" and frames[-1].data == "[DONE]"
    seqs = []
    for f in frames[:-1]:
        obj = json.loads(f.data)
        assert obj["event_type"] == f.event
        seqs.append(parse_event_id(obj["event_id"]))
    assert seqs == list(range(5, 5 + len(seqs)))
    assert json.loads(frames[0].data)["interaction"]["id"] == "v1_store1"
    assert (
        parse_event_id(event_id_for(42)) == 42 and parse_event_id("bogus") is None and parse_event_id("evt_x") is None
    )


def test_encoder_shapes():
    body = encode(decode_file("tool_call"), ctx(model="smart"))
    frames = [(f.event, json.loads(f.data) if f.data != "[DONE]" else None) for f in SSEDecoder().feed(body)]
    kinds = [k for k, _ in frames]
    assert kinds[:2] == ["interaction.created", "interaction.status_update"]
    assert kinds[-2:] == ["interaction.completed", "done"]
    created = frames[0][1]["interaction"]
    assert created["status"] == "in_progress" and created["model"] == "smart" and created["object"] == "interaction"
    starts = [d for k, d in frames if k == "step.start"]
    assert [s["index"] for s in starts] == [0, 1]
    assert starts[1]["step"] == {
        "type": "function_call",
        "id": "call_weather_1",
        "name": "get_weather",
        "arguments": {},
    }
    completed = frames[-2][1]["interaction"]
    assert completed["status"] == "requires_action"
    assert completed["usage"]["total_input_tokens"] == 50 and completed["usage"]["total_output_tokens"] == 20


def test_thinking_usage_and_foreign_signature():
    events = decode_file("thinking")
    body = encode(events, ctx(upstream="anthropic"))
    objs = [json.loads(f.data) for f in SSEDecoder().feed(body) if f.data != "[DONE]"]
    sig = [
        o["delta"]["signature"]
        for o in objs
        if o.get("event_type") == "step.delta" and o["delta"]["type"] == "thought_signature"
    ]
    assert sig == [signatures.pack("anthropic", "c2lnLWFiYzEyMw==")]
    usage = objs[-1]["interaction"]["usage"]
    assert (usage["total_output_tokens"], usage["total_thought_tokens"], usage["total_tokens"]) == (15, 25, 70)
    # summaries: none -> no thought text, the signature still goes out
    body = encode(events, ctx(thinking=Thinking(include_thoughts=False)))
    assert b"thought_summary" not in body and b"thought_signature" in body


def test_error_event_and_keepalive():
    events = [
        MessageStart("x", "m"),
        BlockStart(0, "text"),
        TextDelta(0, "Partial"),
        StreamError("overloaded", "busy", 503),
    ]
    c = ctx(upstream="anthropic")
    enc = CODEC.stream_encoder(c)
    body = b"".join(enc.encode(e) for e in events)
    last = SSEDecoder().feed(body)[-1]
    assert last.event == "error"
    assert json.loads(last.data)["error"] == {"code": "unavailable", "message": "busy"}
    assert b"[DONE]" not in body and enc.encode(TextDelta(0, "more")) == b""
    assert enc.keepalive().startswith(b":")
    # same-dialect raw code kept
    body = encode([MessageStart("x", "m"), StreamError("timeout", "slow", 504, "gateway_timeout")], ctx())
    assert json.loads(SSEDecoder().feed(body)[-1].data)["error"]["code"] == "gateway_timeout"


@pytest.mark.parametrize(
    "name", ["text", "tool_call", "parallel_tool_calls", "thinking", "max_tokens", "long_500", "tool_result_turn"]
)
def test_encode_decode_round_trip(name):
    events = decode_file(name)
    again = fold(decode_bytes(encode(events, ctx())))
    orig = fold(events)
    assert [(b.kind, b.text, b.id, b.name, b.signature) for b in again.blocks] == [
        (b.kind, b.text, b.id, b.name, b.signature) for b in orig.blocks
    ]
    assert again.end == orig.end
    assert (again.usage.input, again.usage.output, again.usage.cache_read) == (
        orig.usage.input,
        orig.usage.output,
        orig.usage.cache_read,
    )


# --------------------------------------------------------------------------- the official SDK


class _Server:
    def __init__(self) -> None:
        self.status, self.body, self.ctype, self.requests = 200, b"", "text/event-stream", []
        outer = self

        class H(BaseHTTPRequestHandler):
            def do_POST(self):
                n = int(self.headers.get("content-length") or 0)
                outer.requests.append((self.path, self.rfile.read(n)))
                self.send_response(outer.status)
                self.send_header("content-type", outer.ctype)
                self.send_header("content-length", str(len(outer.body)))
                self.end_headers()
                self.wfile.write(outer.body)

            def log_message(self, *a):
                pass

        self.srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def client(self):
        genai = pytest.importorskip("google.genai")
        from google.genai import types

        return genai.Client(
            api_key="k",
            http_options=types.HttpOptions(
                base_url=f"http://127.0.0.1:{self.srv.server_port}", retry_options=types.HttpRetryOptions(attempts=1)
            ),
        )


@pytest.fixture(scope="module")
def server():
    s = _Server()
    yield s
    s.srv.shutdown()


def _strict(obj, typ):
    from google.genai._gaos.utils.serializers import unmarshal

    return unmarshal(obj, typ)  # no unknown union variants allowed


@pytest.mark.parametrize(
    "name,upstream",
    [
        ("text", "gemini-interactions"),
        ("tool_call", "openai-chat"),
        ("parallel_tool_calls", "anthropic"),
        ("thinking", "anthropic"),
        ("max_tokens", "gemini"),
    ],
)
def test_sdk_stream(server, name, upstream):
    from google.genai._gaos.types.interactions.interactionsseevent import InteractionSSEEvent

    events = decode_file(name)
    server.status, server.ctype = 200, "text/event-stream"
    server.body = encode(events, ctx(upstream=upstream, model="smart"))
    for frame in SSEDecoder().feed(server.body):
        if frame.data != "[DONE]":
            parsed = _strict(json.loads(frame.data), InteractionSSEEvent)
            assert not getattr(parsed, "is_unknown", False)
            assert getattr(getattr(parsed, "delta", None), "is_unknown", False) is False
    client = server.client()
    got = list(client.interactions.create(model="smart", input="hi", stream=True))
    types_ = [e.event_type for e in got]
    assert types_[0] == "interaction.created" and types_[-1] == "interaction.completed"
    assert all(e.event_id for e in got)
    text = "".join(e.delta.text for e in got if e.event_type == "step.delta" and e.delta.type == "text")
    ref = fold(events)
    assert text == ref.text
    args: dict[int, str] = {}
    for e in got:
        if e.event_type == "step.delta" and e.delta.type == "arguments_delta":
            args[e.index] = args.get(e.index, "") + e.delta.arguments
    assert [json.loads(a) for a in args.values()] == [
        json.loads(b.arguments) for b in ref.blocks if b.kind == "tool_call"
    ]
    final = got[-1].interaction
    assert final.status == {"stop": "completed", "tool_use": "requires_action", "length": "incomplete"}[ref.end.reason]
    assert final.model == "smart" and final.usage.total_input_tokens == ref.usage.input


def test_sdk_stream_error_event(server):
    server.status, server.ctype = 200, "text/event-stream"
    server.body = encode(
        [
            MessageStart("x", "m"),
            BlockStart(0, "text"),
            TextDelta(0, "Partial"),
            StreamError("rate_limit", "slow down", 429),
        ],
        ctx(upstream="openai-chat"),
    )
    client = server.client()
    got = list(client.interactions.create(model="m", input="hi", stream=True))
    assert (
        got[-1].event_type == "error"
        and got[-1].error.code == "resource_exhausted"
        and got[-1].error.message == "slow down"
    )


@pytest.mark.parametrize(
    "name,upstream", [("text", "gemini-interactions"), ("tool_call", "anthropic"), ("thinking", "anthropic")]
)
def test_sdk_whole(server, name, upstream):
    from google.genai._gaos.types.interactions.interaction import Interaction

    ref = fold(decode_file(name))
    c = ctx(upstream=upstream, model="smart")
    obj = CODEC.encode_whole(ref, c, "v1_abc")
    _strict(obj, Interaction)
    server.status, server.ctype, server.body = 200, "application/json", orjson.dumps(obj)
    client = server.client()
    it = client.interactions.create(model="smart", input="hi")
    assert it.id == "v1_abc" and it.model == "smart"
    assert it.status == {"stop": "completed", "tool_use": "requires_action"}[ref.end.reason]
    assert (it.output_text or "") == (ref.blocks[-1].text if ref.blocks[-1].kind == "text" else (it.output_text or ""))
    assert [s.type for s in it.steps] == [
        {"text": "model_output", "thinking": "thought", "tool_call": "function_call"}[b.kind] for b in ref.blocks
    ]
    # and our own decoder reads the resource back
    again = fold(CODEC.decode_whole(obj))
    norm = lambda r: [(b.kind, json.loads(b.text) if b.kind == "tool_call" else b.text, b.id, b.name) for b in r.blocks]  # noqa: E731
    assert norm(again) == norm(ref)
    assert again.end.reason == ref.end.reason and again.usage.output == ref.usage.output


def test_sdk_http_errors(server):
    from google.genai import _interactions_errors as errs

    from gateway.errors import GatewayError, invalid

    for err, cls in (
        (invalid("input: field required", param="input"), errs.BadRequestError),
        (GatewayError("rate_limit", "slow", 429), errs.RateLimitError),
    ):
        status, body = CODEC.render_error(err)
        server.status, server.ctype, server.body = status, "application/json", orjson.dumps(body)
        client = server.client()
        with pytest.raises(cls) as info:
            client.interactions.create(model="m", input="hi")
        assert info.value.status_code == status


@pytest.mark.parametrize(
    "name,status,kind,code",
    [("error_429", 429, "rate_limit", "resource_exhausted"), ("error_500", 500, "api_error", "internal")],
)
def test_error_capture_bodies(name, status, kind, code):
    err = CODEC.decode_error(status, (CAPTURES / f"{name}.json").read_bytes())
    assert (err.kind, err.status, err.raw) == (kind, status, code) and err.message
    assert CODEC.render_error(err)[1]["error"]["code"] == code


async def test_sdk_async_stream(server):
    events = decode_file("tool_call")
    server.status, server.ctype = 200, "text/event-stream"
    server.body = encode(events, ctx(upstream="anthropic", model="smart"))
    client = server.client()
    stream = await client.aio.interactions.create(model="smart", input="hi", stream=True)
    got = [e async for e in stream]
    assert got[-1].event_type == "interaction.completed" and got[-1].interaction.status == "requires_action"
    starts = [e.step for e in got if e.event_type == "step.start"]
    assert starts[1].type == "function_call" and starts[1].id == "call_weather_1" and starts[1].name == "get_weather"
