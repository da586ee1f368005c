"""The stream inspector and the console's admin endpoints, as an admin script sees them.

Real gateway on a loopback port, the fake upstream replaying ``captures/``, the official SDKs as
callers. Checks: both sides of the wire are kept with time offsets, no credential is ever in a
capture, ``errors`` keeps only failures, the ring is bounded, the upstream side downloads as a
``captures/``-style file that replays to the same answer, and the admin endpoints need the key.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest

from gateway.server.app import create_app
from gateway.settings import Settings
from tests.conftest import gateway_config
from tests.support.fake_upstream import FakeUpstream, ServerThread

ADMIN = "adm-inspector-secret-0001"
CALLER = "sk-caller-secret-0002"
SECRETS = (ADMIN, CALLER, "sk-upstream-")


def _serve(fake: FakeUpstream, capture: str | None, max_requests: int = 200, **extra: Any) -> ServerThread:
    conf = gateway_config(f"http://127.0.0.1:{fake.port}")
    conf["auth"] = {"keys_env": "", "keys": [CALLER]}
    conf["admin"] = {"key": ADMIN}
    conf["inspector"] = {"max_requests": max_requests, **({"capture": capture} if capture is not None else {})}
    conf.update(extra)
    return ServerThread(create_app(Settings(**conf)))


@pytest.fixture(scope="module")
def everything(fake: FakeUpstream) -> Iterator[ServerThread]:
    with _serve(fake, "all", max_requests=3) as server:
        yield server


def admin(server: ServerThread, path: str, key: str | None = ADMIN) -> httpx.Response:
    headers = {"authorization": f"Bearer {key}"} if key else {}
    return httpx.get(server.url + path, headers=headers, timeout=10)


def _no_secret(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text


def test_a_streamed_request_keeps_both_sides_of_the_wire(everything: ServerThread) -> None:
    client = openai.OpenAI(base_url=everything.url + "/v1", api_key=CALLER)
    stream = client.chat.completions.create(
        model="anthropic--text", messages=[{"role": "user", "content": "hi"}], stream=True, max_tokens=16
    )
    chunks = list(stream)
    rid = stream.response.headers["x-request-id"]
    assert chunks
    listed = admin(everything, "/admin/inspector").json()
    assert listed["capture"] == "all"
    assert rid in [c["request_id"] for c in listed["captures"]]
    cap = admin(everything, f"/admin/inspector/{rid}")
    assert cap.status_code == 200
    _no_secret(cap.text)
    c = cap.json()
    assert c["caller_request"]["path"] == "/v1/chat/completions"
    assert c["caller_request"]["headers"]["authorization"] == "[redacted]"
    assert '"anthropic--text"' in c["caller_request"]["body"]
    up = c["upstream_requests"][-1]
    assert up["dialect"] == "anthropic" and up["path"] == "/v1/messages" and up["status"] == 200
    assert '"model":"anthropic--text"' in up["body"]
    raw = "".join(f["data"] for f in c["upstream_frames"])
    assert "event: message_start" in raw and "message_stop" in raw  # Anthropic's own frames
    sent = "".join(f["data"] for f in c["caller_frames"])
    assert "chat.completion.chunk" in sent and "data: [DONE]" in sent  # what the OpenAI caller got
    kinds = [e["type"] for e in c["events"]]
    assert kinds[0] == "MessageStart" and "TextDelta" in kinds and kinds[-1] == "End"  # the union events between them
    offsets = [f["ms"] for f in c["upstream_frames"]] + [f["ms"] for f in c["caller_frames"]]
    assert all(o >= 0 for o in offsets) and c["caller_frames"][0]["ms"] >= c["upstream_frames"][0]["ms"]


def test_the_upstream_side_downloads_as_a_capture_file_that_replays(
    everything: ServerThread, fake: FakeUpstream, tmp_path: Any
) -> None:
    client = anthropic.Anthropic(base_url=everything.url, api_key=CALLER)
    with client.messages.stream(
        model="anthropic--tool_call", max_tokens=64, messages=[{"role": "user", "content": "weather?"}]
    ) as stream:
        final = stream.get_final_message()
        rid = stream.response.headers["x-request-id"]
    got = admin(everything, f"/admin/inspector/{rid}?side=upstream")
    assert got.status_code == 200 and "attachment" in got.headers["content-disposition"]
    original = (fake.captures / "anthropic" / "tool_call.sse").read_bytes()
    assert got.content == original  # byte for byte what the upstream sent: a test capture as is
    whole = admin(everything, f"/admin/inspector/{rid}?download=1")
    assert whole.headers["content-disposition"].startswith("attachment") and whole.json()["request_id"] == rid
    assert final.content[-1].type == "tool_use"


def test_the_ring_keeps_max_requests(everything: ServerThread) -> None:
    client = openai.OpenAI(base_url=everything.url + "/v1", api_key=CALLER)
    for _ in range(5):
        client.chat.completions.create(
            model="openai-chat--text", messages=[{"role": "user", "content": "hi"}], max_tokens=16
        )
    assert len(admin(everything, "/admin/inspector").json()["captures"]) == 3


def test_admin_endpoints_need_the_admin_key(everything: ServerThread) -> None:
    for path in ("/admin/inspector", "/admin/inspector/x", "/admin/console/requests", "/admin/console/overview"):
        assert admin(everything, path, key=None).status_code == 401
        assert admin(everything, path, key=CALLER).status_code == 401
    assert admin(everything, "/admin/inspector/nope").status_code == 404


def test_errors_mode_keeps_only_failures(fake: FakeUpstream) -> None:
    with _serve(fake, "errors") as server:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key=CALLER, max_retries=0)
        ok = client.chat.completions.with_raw_response.create(
            model="openai-chat--text", messages=[{"role": "user", "content": "hi"}], max_tokens=16
        )
        with pytest.raises(openai.InternalServerError) as failed:
            client.chat.completions.create(
                model="anthropic--error_500", messages=[{"role": "user", "content": "hi"}], max_tokens=16
            )
        kept = [c["request_id"] for c in admin(server, "/admin/inspector").json()["captures"]]
        assert ok.headers["x-request-id"] not in kept
        bad = failed.value.response.headers["x-request-id"]
        assert kept == [bad]
        c = admin(server, f"/admin/inspector/{bad}").json()
        assert c["upstream_requests"][0]["status"] == 500
        assert c["upstream_frames"] and c["caller_response"]["status"] >= 500
        _no_secret(admin(server, f"/admin/inspector/{bad}").text)


def test_capture_is_off_by_default_on_a_non_loopback_bind_and_errors_on_loopback(fake: FakeUpstream) -> None:
    from gateway.telemetry.inspector import from_settings

    conf = gateway_config(f"http://127.0.0.1:{fake.port}")
    conf["admin"] = {"key": ADMIN}
    assert from_settings(Settings(**conf)).mode == "errors"
    conf["server"] = {**conf["server"], "host": "0.0.0.0"}
    assert from_settings(Settings(**conf)).on is False
    conf["inspector"] = {"capture": "sample:0.5"}
    assert from_settings(Settings(**conf)).mode == "sample"
    with pytest.raises(ValueError, match="sample:F"):
        Settings(**{**conf, "inspector": {"capture": "sometimes"}})


def test_without_admin_there_is_no_console(fake: FakeUpstream) -> None:
    conf = gateway_config(f"http://127.0.0.1:{fake.port}")
    with ServerThread(create_app(Settings(**conf))) as server:
        assert httpx.get(server.url + "/ui").status_code == 404
        assert (
            httpx.get(server.url + "/admin/inspector", headers={"authorization": f"Bearer {ADMIN}"}).status_code == 404
        )


def test_the_page_is_served_with_a_strict_policy(everything: ServerThread) -> None:
    page = httpx.get(everything.url + "/ui")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    csp = page.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "default-src 'none'" in csp and "unsafe-inline" not in csp
    assert "<script>" not in page.text and " style=" not in page.text  # nothing inline
    js = httpx.get(everything.url + "/ui/static/app.js")
    assert js.status_code == 200 and js.headers["content-type"].startswith("text/javascript")
    assert httpx.get(everything.url + "/ui/static/..%2Fsettings.py").status_code == 404
    assert httpx.get(everything.url + "/ui/static/index.html").status_code == 404


def test_recent_requests_and_overview(everything: ServerThread) -> None:
    client = openai.OpenAI(base_url=everything.url + "/v1", api_key=CALLER)
    made = client.chat.completions.with_raw_response.create(
        model="openai-chat--text", messages=[{"role": "user", "content": "hi"}], max_tokens=16
    )
    rid = made.headers["x-request-id"]
    rows = admin(everything, "/admin/console/requests?model=openai-chat--text").json()["requests"]
    row = next(r for r in rows if r["request_id"] == rid)
    assert row["status"] == 200 and row["provider"] == "up-openai-chat" and row["input_tokens"]
    assert all(r["model"] == "openai-chat--text" for r in rows)
    o = admin(everything, "/admin/console/overview").json()
    assert o["requests"] >= 1 and o["series"] and o["ttft_p50"] is not None
    assert any(m["provider"] == "up-openai-chat" and m["input_tokens"] > 0 for m in o["by_model"])
    assert all(m["cost_usd"] is None for m in o["by_model"])  # no price known: null, never a silent 0
    with httpx.stream(
        "GET",
        everything.url + "/admin/console/live?interval=0.2",
        headers={"authorization": f"Bearer {ADMIN}"},
        timeout=5,
    ) as live:
        assert live.headers["content-type"].startswith("text/event-stream")
        first = next(live.iter_lines())
        assert first == "event: overview"


@pytest.mark.parametrize("upstream", ["gemini", "gemini-interactions", "openai-responses", "openai-chat"])
def test_no_upstream_credential_is_captured_whatever_the_dialect(everything: ServerThread, upstream: str) -> None:
    client = anthropic.Anthropic(base_url=everything.url, api_key=CALLER)
    with client.messages.stream(
        model=f"{upstream}--text", max_tokens=16, messages=[{"role": "user", "content": "hi"}]
    ) as stream:
        stream.get_final_message()
        rid = stream.response.headers["x-request-id"]
    got = admin(everything, f"/admin/inspector/{rid}")
    assert got.status_code == 200 and got.json()["upstream_frames"]
    _no_secret(got.text)
    sent = got.json()["caller_request"]["headers"]
    assert [sent[h] for h in ("authorization", "x-api-key") if h in sent] == [
        "[redacted]"
    ]  # the SDK's key header, named but redacted


def test_capture_off_keeps_nothing(fake: FakeUpstream) -> None:
    with _serve(fake, "off") as server:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key=CALLER, max_retries=0)
        client.chat.completions.create(
            model="openai-chat--text", messages=[{"role": "user", "content": "hi"}], max_tokens=16
        )
        with pytest.raises(openai.InternalServerError):
            client.chat.completions.create(
                model="anthropic--error_500", messages=[{"role": "user", "content": "hi"}], max_tokens=16
            )
        listed = admin(server, "/admin/inspector").json()
        assert listed["capture"] == "off" and listed["captures"] == []
        assert len(admin(server, "/admin/console/requests").json()["requests"]) == 2  # the records still are there
