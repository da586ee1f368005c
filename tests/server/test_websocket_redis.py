"""Responses over WebSocket on two replicas sharing a real redis-server: a ``store: true`` chain
started on one replica's socket continues on the other's (a reconnect behind a load balancer)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from gateway.server.app import create_app
from gateway.server.protocol import uvicorn_options
from gateway.settings import Settings
from tests.conftest import gateway_config
from tests.relay.test_stateful import redis_url  # noqa: F401  (the fixture: a redis-server of this module)
from tests.server.test_websocket import final, run, turn, ws_url
from tests.support.fake_upstream import FakeUpstream, ServerThread


@pytest.fixture(scope="module")
def replicas(fake: FakeUpstream, redis_url: str) -> Iterator[tuple[ServerThread, ServerThread]]:  # noqa: F811
    config = gateway_config(f"http://127.0.0.1:{fake.port}")
    config["store"] = {"url": redis_url.rsplit("/", 1)[0] + "/7"}
    with (
        ServerThread(create_app(Settings(**config)), **uvicorn_options()) as a,
        ServerThread(create_app(Settings(**config)), **uvicorn_options()) as b,
    ):
        yield a, b


def test_a_chain_continues_on_another_replica(replicas: tuple[ServerThread, ServerThread], fake: FakeUpstream) -> None:
    import websockets

    a, b = replicas

    async def go() -> dict[str, Any]:
        async with websockets.connect(ws_url(a)) as ws:
            warm = await turn(ws, model="anthropic--text", input="one", generate=False)  # store: true, the default
            first = final(
                await turn(ws, model="anthropic--text", input="two", previous_response_id=warm[-1]["response"]["id"])
            )
        async with websockets.connect(ws_url(b)) as ws:
            return final(await turn(ws, model="anthropic--text", input="three", previous_response_id=first["id"]))

    assert run(go())["status"] == "completed"
    sent = fake.last("anthropic").body["messages"]
    # the prewarm's input, the first turn's (one user turn for Anthropic), its answer, the new item
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert [part["text"] for part in sent[0]["content"]] == ["one", "two"]
    assert [part["text"] for part in sent[2]["content"]] == ["three"]
