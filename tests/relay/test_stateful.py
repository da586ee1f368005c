"""Stateful streams: stored interactions and responses, resume by event id, cancel, delete, TTL,
``store: false``, conversation state, a gateway restart (SQLite) and two processes sharing Redis,
including the replica that dies mid-stream.
"""

from __future__ import annotations

import shutil
import signal
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from google import genai

from gateway.server.app import create_app
from gateway.settings import Settings
from tests.conftest import UPSTREAM_DIALECTS, gateway_config
from tests.support.callers import gemini_client, openai_client
from tests.support.fake_upstream import FakeUpstream, ServerThread, free_port
from tests.support.processes import start_gateway_process

LONG_TEXT = "".join(f"w{i} " for i in range(500))
ROOT = Path(__file__).resolve().parents[2]


_CLIENTS: dict[str, genai.Client] = {}


def interactions(url: str) -> genai.Client:
    """One client per gateway URL, kept alive: a google-genai client closes its connection pool
    when garbage-collected, even in the middle of a call made through a temporary."""
    if url not in _CLIENTS:
        _CLIENTS[url] = gemini_client(url)
    return _CLIENTS[url]


def stream_text(events: list[Any]) -> str:
    return "".join(e.delta.text for e in events if e.event_type == "step.delta" and e.delta.type == "text")


def responses_text(events: list[Any]) -> str:
    return "".join(e.delta for e in events if e.type == "response.output_text.delta")


@pytest.fixture(scope="module")
def sqlite_gateway(fake: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerThread, Path]]:
    db = tmp_path_factory.mktemp("state") / "gateway.db"
    config = gateway_config(f"http://127.0.0.1:{fake.port}")
    config["store"] = {"url": f"sqlite:///{db}"}
    with ServerThread(create_app(Settings(**config))) as server:
        yield server, db


# ---------------------------------------------------------------- Interactions


def test_resume_from_every_event_id_gives_the_same_text(sqlite_gateway: Any) -> None:
    server, _ = sqlite_gateway
    client = interactions(server.url)
    events = list(client.interactions.create(model="anthropic--text", input="hi", stream=True))
    full = stream_text(events)
    assert full == "Hello from the gateway. 你好 — ok!"
    iid = events[0].interaction.id
    ids = [e.event_id for e in events]
    assert all(ids) and len(set(ids)) == len(ids), "every event carries its own id"
    for position, event_id in enumerate(ids):
        rest = list(client.interactions.get(iid, stream=True, last_event_id=event_id))
        assert [e.event_id for e in rest] == ids[position + 1 :]
        assert stream_text(events[: position + 1]) + stream_text(rest) == full
    replay = list(client.interactions.get(iid, stream=True))
    assert [e.event_id for e in replay] == ids


@pytest.mark.parametrize("upstream", UPSTREAM_DIALECTS)
def test_drop_mid_stream_then_resume_exactly_once(sqlite_gateway: Any, fake: FakeUpstream, upstream: str) -> None:
    """The caller drops after a few deltas; the generation goes on; the resume completes the text."""
    server, _ = sqlite_gateway
    client = interactions(server.url)
    model = f"{upstream}--slow_stream"
    before = fake.hits.get(model, 0)
    seen = []
    stream = client.interactions.create(model=model, input="hi", stream=True)
    for event in stream:
        seen.append(event)
        if sum(1 for e in seen if e.event_type == "step.delta") == 5:
            break
    stream.close()  # the caller's connection drops here
    iid, last = seen[0].interaction.id, seen[-1].event_id
    rest = list(client.interactions.get(iid, stream=True, last_event_id=last))
    assert stream_text(seen) + stream_text(rest) == LONG_TEXT
    assert rest[-1].event_type == "interaction.completed"
    assert fake.hits[model] == before + 1, "one upstream generation only"
    whole = client.interactions.get(iid)
    assert [s.type for s in whole.steps] == ["user_input", "model_output"]
    assert whole.status == "completed"


def test_previous_interaction_id_rebuilds_history_for_any_upstream(sqlite_gateway: Any, fake: FakeUpstream) -> None:
    server, _ = sqlite_gateway
    client = interactions(server.url)
    first = client.interactions.create(
        model="anthropic--tool_call",
        input="What's the weather in Paris?",
        system_instruction="Be brief.",
        tools=[
            {
                "type": "function",
                "name": "get_weather",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            }
        ],
    )
    assert first.status == "requires_action"
    call = next(s for s in first.steps if s.type == "function_call")
    second = client.interactions.create(
        model="gemini--tool_result_turn",
        previous_interaction_id=first.id,
        input=[{"type": "function_result", "call_id": call.id, "name": call.name, "result": '{"temp_c": 18}'}],
    )
    assert (
        "".join(c.text for s in second.steps if s.type == "model_output" for c in s.content) == "It is 18°C in Paris."
    )
    contents = fake.last("gemini").body["contents"]
    assert contents[0]["parts"][0]["text"] == "What's the weather in Paris?"
    assert any("functionCall" in p for p in contents[1]["parts"])
    assert contents[2]["parts"][0]["functionResponse"]["name"] == "get_weather"
    assert fake.last("gemini").body["systemInstruction"]["parts"][0]["text"] == "Be brief."


def test_unknown_previous_ids_are_refused_in_dialect(sqlite_gateway: Any) -> None:
    server, _ = sqlite_gateway
    with pytest.raises(Exception) as info:
        interactions(server.url).interactions.create(
            model="anthropic--text", input="x", previous_interaction_id="v1_nope"
        )
    assert getattr(info.value, "status_code", None) == 404
    with pytest.raises(openai.BadRequestError) as refused:  # OpenAI's own answer: a 400, not a 404
        openai_client(server.url).responses.create(model="anthropic--text", input="x", previous_response_id="resp_nope")
    assert refused.value.code == "previous_response_not_found" and refused.value.param == "previous_response_id"


def test_cancel_and_delete(sqlite_gateway: Any) -> None:
    server, _ = sqlite_gateway
    client = interactions(server.url)
    stream = client.interactions.create(model="gemini--slow_stream", input="hi", stream=True)
    first = next(iter(stream))
    iid = first.interaction.id
    stream.close()
    started = time.monotonic()
    cancelled = httpx.post(f"{server.url}/v1beta/interactions/{iid}/cancel", timeout=10).json()
    assert cancelled["status"] == "cancelled"
    assert time.monotonic() - started < 3
    rest = list(client.interactions.get(iid, stream=True, last_event_id=first.event_id))
    assert rest and rest[-1].event_type in ("error", "interaction.completed")
    assert httpx.delete(f"{server.url}/v1beta/interactions/{iid}", timeout=10).status_code == 200
    assert httpx.get(f"{server.url}/v1beta/interactions/{iid}", timeout=10).status_code == 404


# The ledger (spend buckets, request records without content, limit counters) is kept for every
# request, stored or not: store: false is about the answer, not about what it cost.
LEDGER_TABLES = {"spend", "request_log", "budgets", "rl_state", "key_records", "key_version", "sqlite_sequence"}
LEDGER_KEYS = (b"gw:{spend}:", b"gw:requests:", b"gw:rl:", b"gw:keys", b"{gw:keys}:")


def _db_rows(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        tables = [
            r[0] for r in conn.execute("select name from sqlite_master where type='table'") if r[0] not in LEDGER_TABLES
        ]
        return sum(conn.execute(f"select count(*) from {t}").fetchone()[0] for t in tables)


def _redis_keys(client: Any) -> list[bytes]:
    return [k for k in client.keys("*") if not k.startswith(LEDGER_KEYS)]


def test_store_false_leaves_no_trace_sqlite(fake: FakeUpstream, tmp_path: Path) -> None:
    db = tmp_path / "fresh.db"
    config = gateway_config(f"http://127.0.0.1:{fake.port}")
    config["store"] = {"url": f"sqlite:///{db}"}
    with ServerThread(create_app(Settings(**config))) as server:
        events = list(
            interactions(server.url).interactions.create(model="anthropic--text", input="hi", stream=True, store=False)
        )
        assert stream_text(events) == "Hello from the gateway. 你好 — ok!"
        interactions(server.url).interactions.create(model="anthropic--text", input="hi", store=False)
        openai_client(server.url).responses.create(model="anthropic--text", input="hi", store=False)
        assert _db_rows(db) == 0
        openai_client(server.url).responses.create(model="anthropic--text", input="hi")  # store defaults to true
        assert _db_rows(db) > 0


def test_restart_keeps_finished_interactions_readable(fake: FakeUpstream, tmp_path: Path) -> None:
    db = tmp_path / "restart.db"
    config = gateway_config(f"http://127.0.0.1:{fake.port}")
    config["store"] = {"url": f"sqlite:///{db}"}
    with ServerThread(create_app(Settings(**config))) as server:
        created = interactions(server.url).interactions.create(model="anthropic--text", input="hi")
        stored_response = openai_client(server.url).responses.create(model="gemini--text", input="hi")
    with ServerThread(create_app(Settings(**config))) as server:
        again = interactions(server.url).interactions.get(created.id)
        assert again.status == "completed" and [s.type for s in again.steps] == ["user_input", "model_output"]
        assert (
            openai_client(server.url).responses.retrieve(stored_response.id).output_text
            == "Hello from the gateway. 你好 — ok!"
        )


def test_ttl_expiry(fake: FakeUpstream, tmp_path: Path) -> None:
    config = gateway_config(f"http://127.0.0.1:{fake.port}")
    config["store"] = {"url": f"sqlite:///{tmp_path / 'ttl.db'}", "ttl_hours": 1 / 3600}  # one second
    with ServerThread(create_app(Settings(**config))) as server:
        created = interactions(server.url).interactions.create(model="anthropic--text", input="hi")
        assert httpx.get(f"{server.url}/v1beta/interactions/{created.id}").status_code == 200
        time.sleep(1.5)
        assert httpx.get(f"{server.url}/v1beta/interactions/{created.id}").status_code == 404


# ---------------------------------------------------------------- Responses


def test_responses_background_resume_with_starting_after(sqlite_gateway: Any) -> None:
    server, _ = sqlite_gateway
    client = openai_client(server.url)
    created = client.responses.create(model="anthropic--slow_stream", input="hi", background=True)
    assert created.status in ("queued", "in_progress")
    events = list(client.responses.retrieve(created.id, stream=True))
    numbers = [e.sequence_number for e in events]
    assert numbers == list(range(len(numbers)))
    assert responses_text(events) == LONG_TEXT
    for after in (0, 7, len(events) - 2):
        rest = list(client.responses.retrieve(created.id, stream=True, starting_after=after))
        assert [e.sequence_number for e in rest] == numbers[after + 1 :]
    assert client.responses.retrieve(created.id).status == "completed"


def test_responses_cancel_only_background_ones(sqlite_gateway: Any) -> None:
    import openai

    server, _ = sqlite_gateway
    client = openai_client(server.url)
    running = client.responses.create(model="anthropic--slow_stream", input="hi", background=True)
    assert running.background is True
    cancelled = client.responses.cancel(running.id)
    assert cancelled.status == "cancelled" and cancelled.background is True
    assert client.responses.cancel(running.id).status == "cancelled"  # again: returned as it is
    foreground = client.responses.create(model="openai-chat--text", input="hi")
    assert foreground.background is False and foreground.store is True
    with pytest.raises(openai.BadRequestError, match="background=true"):
        client.responses.cancel(foreground.id)
    assert client.responses.retrieve(foreground.id).status == "completed"


def test_responses_previous_response_id_across_dialects(sqlite_gateway: Any, fake: FakeUpstream) -> None:
    server, _ = sqlite_gateway
    client = openai_client(server.url)
    first = client.responses.create(
        model="openai-chat--tool_call",
        input="What's the weather in Paris?",
        tools=[{"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {}}}],
    )
    call = next(o for o in first.output if o.type == "function_call")
    second = client.responses.create(
        model="anthropic--tool_result_turn",
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "18C"}],
    )
    assert second.output_text == "It is 18°C in Paris."
    messages = fake.last("anthropic").body["messages"]
    assert (
        messages[0]["content"][0]["text"] == "What's the weather in Paris?"
        if isinstance(messages[0]["content"], list)
        else messages[0]["content"] == "What's the weather in Paris?"
    )
    assert any(b["type"] == "tool_use" and b["id"] == call.call_id for b in messages[1]["content"])
    assert httpx.delete(f"{server.url}/v1/responses/{second.id}").json()["deleted"] is True


# ---------------------------------------------------------------- replicas on Redis


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed (.ci/run installs the Debian package)")
    port = free_port()
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--save", "", "--appendonly", "no"], stdout=subprocess.DEVNULL
    )
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            import socket

            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.05)
    yield f"redis://127.0.0.1:{port}/0"
    proc.terminate()
    proc.wait(timeout=10)


def _gateway_process(tmp: Path, fake_port: int, redis: str, name: str) -> tuple[subprocess.Popen[bytes], str]:
    import tomllib  # noqa: F401  (the config below is TOML)

    port = free_port()
    config = gateway_config(f"http://127.0.0.1:{fake_port}")
    lines = [
        f"[server]\nport = {port}\naccess_log = false\nkeepalive_seconds = 0.5\n",
        f'[store]\nurl = "{redis}"\n',
        '[auth]\nkeys_env = ""\n',
    ]
    for p in config["providers"]:
        lines.append("[[providers]]\n" + "".join(f"{k} = {toml_value(v)}\n" for k, v in p.items()))
    for r in config["routes"]:
        lines.append("[[routes]]\n" + "".join(f"{k} = {toml_value(v)}\n" for k, v in r.items()))
    path = tmp / f"{name}.toml"
    path.write_text("\n".join(lines))
    return start_gateway_process(path, port, timeout=20)


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def test_two_processes_share_redis(fake: FakeUpstream, redis_url: str, tmp_path: Path) -> None:
    a, url_a = _gateway_process(tmp_path, fake.port, redis_url, "a")
    b, url_b = _gateway_process(tmp_path, fake.port, redis_url, "b")
    try:
        stream = interactions(url_a).interactions.create(model="openai-chat--slow_stream", input="hi", stream=True)
        seen = []
        for event in stream:
            seen.append(event)
            if len(seen) == 8:
                break
        stream.close()
        rest = list(
            interactions(url_b).interactions.get(seen[0].interaction.id, stream=True, last_event_id=seen[-1].event_id)
        )
        assert stream_text(seen) + stream_text(rest) == LONG_TEXT, (
            rest[-1].event_type,
            getattr(rest[-1], "error", None),
        )
        ids = [e.event_id for e in seen + rest]
        assert len(ids) == len(set(ids)), "nothing repeated"
        # the replica running a generation dies: a resume on the other ends in an error, not a hang
        stream = interactions(url_a).interactions.create(model="anthropic--slow_stream", input="hi", stream=True)
        first = next(iter(stream))
        stream.close()
        a.send_signal(signal.SIGKILL)
        a.wait(timeout=10)
        started = time.monotonic()
        tail = list(
            interactions(url_b).interactions.get(first.interaction.id, stream=True, last_event_id=first.event_id)
        )
        assert tail[-1].event_type == "error"
        # given up once its heartbeat is older than owner_timeout_seconds and stays unrenewed for
        # a quarter of that again (see store.base.Liveness), plus one look: 8 + 2 + 1 s by default
        timeout = Settings().store.owner_timeout_seconds
        elapsed = time.monotonic() - started
        assert timeout <= elapsed < timeout * 1.25 + 3, elapsed
    finally:
        for proc in (a, b):
            if proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=10)


def test_store_false_leaves_no_trace_redis(fake: FakeUpstream, redis_url: str) -> None:
    import redis as redis_lib

    config = gateway_config(f"http://127.0.0.1:{fake.port}")
    config["store"] = {"url": redis_url.rsplit("/", 1)[0] + "/3"}
    client = redis_lib.Redis.from_url(config["store"]["url"])
    client.flushdb()
    with ServerThread(create_app(Settings(**config))) as server:
        list(
            interactions(server.url).interactions.create(model="anthropic--text", input="hi", stream=True, store=False)
        )
        openai_client(server.url).responses.create(model="anthropic--text", input="hi", store=False)
        assert _redis_keys(client) == []
        interactions(server.url).interactions.create(model="anthropic--text", input="hi")
        assert _redis_keys(client) != []


def test_responses_input_items(sqlite_gateway: Any) -> None:
    server, _ = sqlite_gateway
    client = openai_client(server.url)
    created = client.responses.create(model="gemini--text", input=[{"role": "user", "content": "Hello there"}])
    items = list(client.responses.input_items.list(created.id))
    assert len(items) == 1 and items[0].type == "message" and items[0].role == "user"
    assert items[0].content[0].text == "Hello there"
    with pytest.raises(openai.NotFoundError):
        list(client.responses.input_items.list("resp_missing"))
