"""Every streamed response carries the gateway's request id (issue 23 item 2).

The ``x-request-id`` header comes with the response head, before the first event, on every stream:
each caller dialect's model call and the resumed streams (``GET /v1/responses/{id}?stream=true``,
``GET /v1beta/interactions/{id}?stream=true``). The access-log line of the request has the same id,
so a user quoting it can be found; a resume's line carries no usage of its own.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from gateway.server.app import create_app
from gateway.settings import Settings
from tests.conftest import gateway_config
from tests.support.access_log import Capture, capture_access_log
from tests.support.callers import openai_client
from tests.support.fake_upstream import FakeUpstream, ServerThread

GENERATED = re.compile(r"^req_[0-9a-f]{24}$")


@pytest.fixture(scope="module")
def env(fake: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerThread, Capture]]:
    config = gateway_config(f"http://127.0.0.1:{fake.port}", access_log=True)
    config["store"] = {"url": f"sqlite:///{tmp_path_factory.mktemp('rid') / 'state.db'}"}
    with capture_access_log() as capture, ServerThread(create_app(Settings(**config))) as server:
        yield server, capture


MSG = [{"role": "user", "content": "hi"}]
STREAMS = {
    "anthropic": ("/v1/messages", {"model": "openai-chat--text", "max_tokens": 50, "stream": True, "messages": MSG}),
    "openai-chat": ("/v1/chat/completions", {"model": "anthropic--text", "stream": True, "messages": MSG}),
    "openai-responses": ("/v1/responses", {"model": "gemini--text", "stream": True, "input": "hi"}),
    "gemini": (
        "/v1beta/models/openai-responses--text:streamGenerateContent?alt=sse",
        {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
    ),
    "gemini-interactions": ("/v1beta/interactions", {"model": "anthropic--text", "stream": True, "input": "hi"}),
    "cut mid-stream": ("/v1/chat/completions", {"model": "anthropic--reset", "stream": True, "messages": MSG}),
}


def _first_event_after_head(
    url: str, path: str, body: dict[str, Any], headers: dict[str, str] | None = None
) -> tuple[str | None, bytes]:
    """The request id as read from the response head, and the first bytes of the body after it."""
    with httpx.stream("POST", url + path, json=body, headers=headers or {}, timeout=20) as r:
        assert r.status_code == 200
        rid = r.headers.get("x-request-id")  # known before a byte of the body is read
        body_iter = r.iter_bytes()
        first = next(body_iter)
        for _ in body_iter:
            pass
    return rid, first


@pytest.mark.parametrize("caller", list(STREAMS))
def test_every_stream_carries_its_request_id(env: Any, caller: str) -> None:
    server, capture = env
    path, body = STREAMS[caller]
    rid, first = _first_event_after_head(server.url, path, body)
    assert rid is not None and GENERATED.match(rid), rid
    assert first.strip()
    line = capture.line(rid)
    assert line["stream"] is True and line["path"] == path.split("?")[0]


def test_the_callers_own_request_id_is_kept(env: Any) -> None:
    server, capture = env
    mine = "support-ticket-" + uuid.uuid4().hex[:8]
    rid, _ = _first_event_after_head(server.url, *STREAMS["openai-chat"], headers={"x-request-id": mine})
    assert rid == mine
    assert capture.line(mine)["input_tokens"]


def test_resumed_responses_stream_carries_a_request_id(env: Any) -> None:
    server, capture = env
    created = openai_client(server.url).responses.create(model="anthropic--slow_stream", input="hi", background=True)
    url = server.url + f"/v1/responses/{created.id}?stream=true&starting_after=3"
    with httpx.stream("GET", url, timeout=30) as r:
        rid = r.headers.get("x-request-id")
        text = r.read()
    # the POST's line is written when its generation ends, with the generation's usage
    started = capture.line_where(
        lambda e: e.get("path") == "/v1/responses" and e.get("stream") is False and e["status"] == 200, timeout=30
    )
    assert started["output_tokens"] == 500
    assert rid is not None and GENERATED.match(rid) and rid != started["request_id"]
    assert b"response.completed" in text
    line = capture.line(rid)
    assert line["path"] == f"/v1/responses/{created.id}" and line["stream"] is True and line["status"] == 200
    assert line["input_tokens"] is None and line["usage_missing"] is False, (
        "a resume does not count the generation again"
    )


def test_resumed_interaction_stream_carries_a_request_id(env: Any) -> None:
    server, capture = env
    with httpx.stream(
        "POST",
        server.url + "/v1beta/interactions",
        json={"model": "gemini--text", "stream": True, "input": "hi"},
        timeout=20,
    ) as r:
        first_rid = r.headers["x-request-id"]
        body = r.read()
    iid = re.search(rb'"id":\s*"([^"]+)"', body).group(1).decode()  # interaction.created comes first
    mine = "resume-" + uuid.uuid4().hex[:8]
    with httpx.stream(
        "GET", server.url + f"/v1beta/interactions/{iid}?stream=true", headers={"x-request-id": mine}, timeout=20
    ) as r:
        assert r.headers.get("x-request-id") == mine
        replay = r.read()
    assert b"interaction.completed" in replay
    assert capture.line(mine)["stream"] is True and capture.line(first_rid)["request_id"] == first_rid


def test_stored_endpoint_errors_carry_a_request_id(env: Any) -> None:
    server, capture = env
    r = httpx.get(server.url + "/v1/responses/resp_nope?stream=true", timeout=10)
    assert r.status_code == 404 and r.headers.get("x-request-id")
    line = capture.line(r.headers["x-request-id"])
    assert line["status"] == 404 and line["error_kind"] == "not_found"
