"""The router's remembered answers (gateway/server/route_index.py): a static path answers the same on
its second request as on its first (the one Starlette's scan chose), a wrong method is still 405 in
the caller's dialect, a path with parameters still routes, and only static routes are remembered."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from gateway.server.app import create_app
from gateway.server.protocol import uvicorn_options
from gateway.server.route_index import RouteIndex
from gateway.settings import Settings
from tests.conftest import gateway_config
from tests.server.test_bad_input_validation import BASE, check_shape
from tests.support.fake_upstream import ServerThread


@pytest.fixture(scope="module")
def indexed(fake: Any) -> Iterator[tuple[ServerThread, RouteIndex]]:
    app = create_app(Settings(**gateway_config(f"http://127.0.0.1:{fake.port}")))
    index = app.router.middleware_stack
    assert isinstance(index, RouteIndex)
    with ServerThread(app, **uvicorn_options()) as server:
        yield server, index


@pytest.mark.parametrize("dialect", ["anthropic", "openai-chat", "openai-responses"])
def test_a_static_path_answers_the_same_the_second_time(indexed: Any, dialect: str) -> None:
    server, index = indexed
    path, body = BASE[dialect]
    answers = [httpx.post(server.url + path, json=body, timeout=10) for _ in range(3)]
    assert [a.status_code for a in answers] == [200, 200, 200], answers[0].text
    assert answers[1].json().keys() == answers[0].json().keys()
    assert (path, "POST") in index.known
    # the wrong method on that remembered path is still Starlette's 405, in the dialect's shape
    wrong = httpx.get(server.url + path, timeout=10)
    check_shape(dialect, 405, wrong)
    assert "POST" in wrong.headers["allow"]
    assert (path, "GET") not in index.known


def test_health_twice_and_paths_with_parameters_still_route(indexed: Any) -> None:
    server, index = indexed
    assert [httpx.get(server.url + "/healthz", timeout=10).status_code for _ in range(2)] == [200, 200]
    model = "openai-chat--text"
    for _ in range(2):
        got = httpx.get(server.url + f"/v1/models/{model}", timeout=10)
        assert got.status_code == 200 and got.json()["id"] == model
    for _ in range(2):  # an unknown path: never remembered
        check_shape("openai-chat", 404, httpx.post(server.url + "/v1/chat/complete", json={}, timeout=10))
    assert all(route.path == path and not route.param_convertors for (path, _), route in index.known.items())
    assert ("/healthz", "GET") in index.known
    assert not any(path.startswith("/v1/models/") or path == "/v1/chat/complete" for path, _ in index.known)


def test_a_remembered_model_path_still_refuses_what_the_edge_refuses(indexed: Any, fake: Any) -> None:
    """A model call is served past Starlette's middleware once its path is remembered
    (``IndexedStarlette``): the edge's refusals must still hold there, with nothing sent upstream."""
    import socket

    server, index = indexed
    path, body = BASE["openai-chat"]
    assert httpx.post(server.url + path, json=body, timeout=10).status_code == 200
    assert (path, "POST") in index.known
    before = len(fake.received)
    data = httpx.Request("POST", "http://x", json=body).content
    for head in (
        "POST /v1/chat%2Fcompletions HTTP/1.1\r\n",  # decodes to the remembered path
        "POST /v1/chat/completions%00 HTTP/1.1\r\n",
        f"POST {path} HTTP/1.1\r\nconnection: Upgrade\r\nupgrade: websocket\r\n",
    ):
        raw = (
            f"{head}host: x\r\ncontent-type: application/json\r\ncontent-length: {len(data)}\r\n"
            "connection: close\r\n\r\n"
        ).encode() + data
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
            s.sendall(raw)
            answer = b""
            while chunk := s.recv(65536):
                answer += chunk
        assert answer.split()[1] in (b"404", b"426"), answer[:300]
    assert len(fake.received) == before
