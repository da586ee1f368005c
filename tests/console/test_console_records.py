"""The console's Requests and Overview see every request, detached generations included.

A background response or a stored interaction is answered before its generation ends; its access
record is finished when the generation is (``SharedRecord``). The console's ring must get that
finished record — once, with the generation's usage and cost — not miss it, and not count the
POST's early answer as a request with no tokens. Callers are the official openai and google-genai
SDKs; the upstream is the loopback fake.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from gateway.server.app import create_app
from gateway.settings import Settings
from tests.conftest import gateway_config
from tests.relay.test_stateful import interactions
from tests.support.callers import openai_client
from tests.support.fake_upstream import FakeUpstream, ServerThread

ADMIN = "adm-records-secret"
RATES = {"input": 1.0, "output": 10.0, "cache_read": 0.1, "cache_write": 2.0, "reasoning": 20.0}


def _config(fake: FakeUpstream, db: Any) -> dict[str, Any]:
    conf = gateway_config(f"http://127.0.0.1:{fake.port}")
    conf["admin"] = {"key": ADMIN}
    conf["prices"] = {"*": RATES}
    conf["store"] = {"url": f"sqlite:///{db}"}
    return conf


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return tmp_path_factory.mktemp("records") / "gateway.db"


@pytest.fixture(scope="module")
def gw(fake: FakeUpstream, db: Any) -> Iterator[ServerThread]:
    with ServerThread(create_app(Settings(**_config(fake, db)))) as server:
        yield server


def _admin(gw: ServerThread, path: str, **params: Any) -> Any:
    return httpx.get(gw.url + path, params=params, headers={"authorization": f"Bearer {ADMIN}"}).json()


def _console_record(gw: ServerThread, rid: str) -> dict[str, Any]:
    deadline = time.monotonic() + 10
    while True:
        found = _admin(gw, "/admin/console/requests", request_id=rid)["requests"]
        if found:
            time.sleep(0.2)  # and it stays one record
            again = _admin(gw, "/admin/console/requests", request_id=rid)["requests"]
            assert len(again) == 1, again
            return dict(again[0])
        assert time.monotonic() < deadline, f"{rid} never reached the console's Requests"
        time.sleep(0.05)


def test_background_and_stored_generations_reach_requests_and_overview_once(gw: ServerThread) -> None:
    before = _admin(gw, "/admin/console/overview")["requests"]
    ids = {name: f"req_console_{name}_{uuid.uuid4().hex[:8]}" for name in ("background", "interaction", "plain")}
    oai, genai = openai_client(gw.url), interactions(gw.url)
    background = oai.responses.create(
        model="anthropic--text", input="hi", background=True, extra_headers={"x-request-id": ids["background"]}
    )
    list(
        genai.interactions.create(
            model="anthropic--text", input="hi", stream=True, extra_headers={"x-request-id": ids["interaction"]}
        )
    )
    oai.chat.completions.create(
        model="anthropic--text",
        messages=[{"role": "user", "content": "hi"}],
        extra_headers={"x-request-id": ids["plain"]},
    )
    for name, rid in ids.items():
        line = _console_record(gw, rid)
        assert line["status"] == 200 and line["provider"] == "up-anthropic", (name, line)
        assert (line["input_tokens"], line["output_tokens"]) == (30, 12), (
            name,
            line,
        )  # the generation's usage, not the early answer's
        assert line["cost_usd"] and line["cost_usd"] > 0, (name, line)
        stored = next(r for r in _admin(gw, "/admin/requests", limit=50)["requests"] if r["request_id"] == rid)
        assert stored["cost_usd"] == line["cost_usd"]  # the console shows what the ledger booked
    assert oai.responses.retrieve(background.id).status == "completed"
    assert _admin(gw, "/admin/console/overview")["requests"] == before + 3


def test_request_id_filter_finds_one_record_and_no_other(gw: ServerThread) -> None:
    rid = f"req_console_one_{uuid.uuid4().hex[:8]}"
    openai_client(gw.url).chat.completions.create(
        model="openai-chat--text", messages=[{"role": "user", "content": "hi"}], extra_headers={"x-request-id": rid}
    )
    assert [r["request_id"] for r in _admin(gw, "/admin/console/requests", request_id=rid)["requests"]] == [rid]
    assert _admin(gw, "/admin/console/requests", request_id="req_nobody")["requests"] == []


def test_info_lists_the_route_names_for_the_playground(gw: ServerThread) -> None:
    models = _admin(gw, "/admin/console/info")["models"]
    assert "demo" in models and "anthropic--text@text" in models and "anthropic--*" in models
    assert models.index("anthropic--text@text") < models.index(
        "anthropic--*"
    )  # the listed names first, then the patterns


def test_requests_show_what_another_worker_on_the_same_store_answered(
    gw: ServerThread, fake: FakeUpstream, db: Any
) -> None:
    """As with ``--workers 2``: two gateways on one store; each one's console lists the other's requests."""
    rid = f"req_console_other_{uuid.uuid4().hex[:8]}"
    with ServerThread(create_app(Settings(**_config(fake, db)))) as other:
        openai_client(other.url).chat.completions.create(
            model="gemini--text", messages=[{"role": "user", "content": "hi"}], extra_headers={"x-request-id": rid}
        )
        line = _console_record(gw, rid)
    assert line["provider"] == "up-gemini" and line["output_tokens"]
    assert _admin(gw, "/admin/console/requests", request_id=rid, source="process") == {
        "source": "process",
        "requests": [],
    }  # not this process's ring
    assert _admin(gw, "/admin/console/requests", limit=5)["source"] == "store"
