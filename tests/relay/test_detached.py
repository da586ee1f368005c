"""Detached generations (stored interactions, background responses) as their callers see them:

* a cancel ends every open stream of the generation in its own dialect's terms (``cancelled``,
  then the normal end), for the caller that started it and for one following through a resume;
* a generation that is alive is never given up by a follower: not under CPU load, not when the
  event loop of its process stalls for seconds, in the same process or on another replica;
* its usage is in exactly one access-log line — the request that started it — and in the token
  metrics once, also when it was cancelled or cut; resumes, replays and GETs add nothing.

Each runs on a SQLite file and on a real redis-server; clients are the google-genai and openai SDKs.
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import orjson
import pytest
import redis as redis_lib

from gateway.server.app import create_app
from gateway.settings import Settings
from tests.conftest import gateway_config
from tests.relay.test_stateful import LONG_TEXT, interactions, redis_url, responses_text, stream_text  # noqa: F401  (redis_url: fixture)
from tests.support.callers import openai_client
from tests.support.fake_upstream import FakeUpstream, ServerThread
from tests.telemetry.test_ops import Capture, metric


@dataclass
class Gateway:
    server: ServerThread
    state: Any  # GatewayState, for its event loop

    @property
    def url(self) -> str:
        return self.server.url

    def loop(self) -> asyncio.AbstractEventLoop:
        """The gateway's event loop (the one its detached generations run on)."""
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            for task in list(self.state.stateful.tasks.values()):
                return task.get_loop()
            time.sleep(0.01)
        raise AssertionError("no generation is running")

    def stall(self, seconds: float) -> None:
        """Block the gateway's event loop (as a CPU-bound stretch or a GC pause would)."""
        self.loop().call_soon_threadsafe(time.sleep, seconds)


def _config(fake: FakeUpstream, store_url: str) -> dict[str, Any]:
    config = gateway_config(f"http://127.0.0.1:{fake.port}", access_log=True)
    for provider in config["providers"]:
        provider["idle_timeout"] = 30.0  # a stalled gateway loop must not read as a silent upstream
    config["store"] = {"url": store_url}
    return config


def _fresh_redis(base: str, db: int) -> str:
    url = base.rsplit("/", 1)[0] + f"/{db}"
    with redis_lib.Redis.from_url(url) as client:
        client.flushdb()
    return url


@pytest.fixture(scope="module")
def access() -> Iterator[Capture]:
    capture = Capture()
    logger = logging.getLogger("gateway.access")
    logger.addHandler(capture)
    logger.setLevel(logging.INFO)
    yield capture
    logger.removeHandler(capture)


@pytest.fixture(scope="module", params=["sqlite", "redis"])
def gw(
    request: pytest.FixtureRequest, fake: FakeUpstream, access: Capture, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Gateway]:
    if request.param == "sqlite":
        store_url = f"sqlite:///{tmp_path_factory.mktemp('detached') / 'gateway.db'}"
    else:
        store_url = _fresh_redis(request.getfixturevalue("redis_url"), 5)
    app = create_app(Settings(**_config(fake, store_url)))
    with ServerThread(app) as server:
        yield Gateway(server, app.state.gateway)


@pytest.fixture(scope="module")
def sqlite_gw(fake: FakeUpstream, access: Capture, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    app = create_app(Settings(**_config(fake, f"sqlite:///{tmp_path_factory.mktemp('load') / 'gateway.db'}")))
    with ServerThread(app) as server:
        yield Gateway(server, app.state.gateway)


def in_thread(fn: Callable[[], Any]) -> Callable[[], Any]:
    """Run ``fn`` beside the test; the returned function joins it and gives its result (or raises)."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = fn()
        except BaseException as exc:  # handed to the joining test
            out["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()

    def join() -> Any:
        thread.join(60)
        assert not thread.is_alive(), "the thread did not finish"
        if "error" in out:
            raise out["error"]
        return out["value"]

    return join


def deltas(events: list[Any]) -> int:
    return sum(
        1
        for e in events
        if getattr(e, "event_type", None) == "step.delta" or getattr(e, "type", None) == "response.output_text.delta"
    )


# ---------------------------------------------------------------- item 3: cancel ends every open stream


def _assert_interaction_cancelled(events: list[Any]) -> None:
    kinds = [e.event_type for e in events]
    assert "error" not in kinds, kinds[-5:]
    assert kinds[-2:] == ["interaction.status_update", "interaction.completed"], kinds[-5:]
    assert events[-2].status == "cancelled"
    assert events[-1].interaction.status == "cancelled"
    assert events[-1].interaction.usage.total_input_tokens == 30  # the usage so far (Anthropic's message_start)
    text = stream_text(events)
    assert LONG_TEXT.startswith(text) and len(text) < len(LONG_TEXT)


def test_cancel_ends_open_interaction_streams_with_cancelled(gw: Gateway) -> None:
    client = interactions(gw.url)
    stream = client.interactions.create(model="anthropic--slow_stream", input="hi", stream=True)
    seen: list[Any] = []
    follower: Callable[[], Any] | None = None
    for event in stream:
        seen.append(event)
        if deltas(seen) == 5 and follower is None:
            iid, resume_from = seen[0].interaction.id, seen[2].event_id
            follower = in_thread(
                lambda iid=iid, resume_from=resume_from: list(
                    client.interactions.get(iid, stream=True, last_event_id=resume_from)
                )
            )
            time.sleep(0.2)  # the follower is reading the live tail when the cancel comes
            answer = httpx.post(f"{gw.url}/v1beta/interactions/{iid}/cancel", timeout=10).json()
            assert answer["status"] == "cancelled" and "errors" not in answer
    assert follower is not None
    _assert_interaction_cancelled(seen)  # the stream that started it
    followed = follower()
    _assert_interaction_cancelled(followed)  # the one following through a resume
    assert [e.event_id for e in followed] == [e.event_id for e in seen[3:]]
    # the replay ends exactly like a finished stream: interaction.completed, then done
    raw = httpx.get(f"{gw.url}/v1beta/interactions/{iid}", params={"stream": "true"}, timeout=10).content
    assert raw.endswith(b"event: done\ndata: [DONE]\n\n")
    assert b'"status":"cancelled"' in raw.rsplit(b"event: interaction.completed", 1)[1]
    whole = client.interactions.get(iid)
    assert whole.status == "cancelled" and not whole.errors


def _assert_response_cancelled(events: list[Any]) -> None:
    kinds = [e.type for e in events]
    assert "error" not in kinds, kinds[-5:]
    assert kinds[-1] == "response.failed"  # the terminal event the SDKs know; its status tells why
    final = events[-1].response
    assert final.status == "cancelled" and final.error is None
    assert final.usage is not None and final.usage.input_tokens == 30
    assert [e.sequence_number for e in events] == list(
        range(events[0].sequence_number, events[0].sequence_number + len(events))
    )
    text = responses_text(events)
    assert LONG_TEXT.startswith(text) and len(text) < len(LONG_TEXT)


def test_cancel_ends_background_response_streams_with_cancelled(gw: Gateway) -> None:
    client = openai_client(gw.url)
    created = client.responses.create(model="anthropic--slow_stream", input="hi", background=True)
    seen: list[Any] = []
    follower: Callable[[], Any] | None = None
    for event in client.responses.retrieve(created.id, stream=True):  # raises on an `error` event
        seen.append(event)
        if deltas(seen) == 5 and follower is None:
            after = seen[2].sequence_number
            follower = in_thread(
                lambda after=after: list(client.responses.retrieve(created.id, stream=True, starting_after=after))
            )
            time.sleep(0.2)
            assert client.responses.cancel(created.id).status == "cancelled"
    assert follower is not None
    _assert_response_cancelled(seen)
    followed = follower()
    _assert_response_cancelled(followed)
    assert followed[0].sequence_number == seen[3].sequence_number
    stored = client.responses.retrieve(created.id)
    assert stored.status == "cancelled" and stored.error is None


def test_cancel_through_another_replica_ends_its_streams(fake: FakeUpstream, access: Capture, redis_url: str) -> None:  # noqa: F811
    """The generation runs on replica A; the caller follows and cancels through replica B."""
    store_url = _fresh_redis(redis_url, 6)
    with (
        ServerThread(create_app(Settings(**_config(fake, store_url)))) as a,
        ServerThread(create_app(Settings(**_config(fake, store_url)))) as b,
    ):
        first = list(
            _take(interactions(a.url).interactions.create(model="anthropic--slow_stream", input="hi", stream=True), 4)
        )
        iid = first[0].interaction.id
        follower = in_thread(
            lambda: list(interactions(b.url).interactions.get(iid, stream=True, last_event_id=first[-1].event_id))
        )
        time.sleep(0.3)
        started = time.monotonic()
        assert httpx.post(f"{b.url}/v1beta/interactions/{iid}/cancel", timeout=10).json()["status"] == "cancelled"
        assert time.monotonic() - started < 5  # the owner hears it within a heartbeat
        _assert_interaction_cancelled(first + follower())

        client = openai_client(a.url)
        created = client.responses.create(model="anthropic--slow_stream", input="hi", background=True)
        follower = in_thread(lambda: list(openai_client(b.url).responses.retrieve(created.id, stream=True)))
        time.sleep(0.5)
        assert openai_client(b.url).responses.cancel(created.id).status == "cancelled"
        _assert_response_cancelled(follower())


def _take(stream: Any, n: int) -> Iterator[Any]:
    """The first ``n`` events, then the caller's connection drops."""
    for i, event in enumerate(stream):
        yield event
        if i + 1 == n:
            break
    stream.close()


# ---------------------------------------------------------------- item 4: a live generation is never given up


@pytest.fixture(scope="module")
def quiet_gw(access: Capture, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    """SQLite; its upstream answers half, is silent for 8 s (a model thinking), then the rest."""
    upstream = FakeUpstream(pause_seconds=8.0)
    with ServerThread(upstream) as fake_server:
        upstream.port = fake_server.port
        app = create_app(Settings(**_config(upstream, f"sqlite:///{tmp_path_factory.mktemp('quiet') / 'gateway.db'}")))
        with ServerThread(app) as server:
            yield Gateway(server, app.state.gateway)


def test_a_follower_in_the_same_process_never_gives_up_its_generation(quiet_gw: Gateway) -> None:
    """The process runs the generation itself, so a follower there needs no heartbeat to know it
    is alive. Here the heartbeat is starved for 7 s (as on a busy machine) while the upstream is
    quiet: the generation is fine, and so is its follower."""
    store = quiet_gw.state.stateful.store
    renew = store.heartbeat

    async def starved(stream_id: str, owner: str) -> bool:
        await asyncio.sleep(7.0)
        return bool(await renew(stream_id, owner))

    client = openai_client(quiet_gw.url)
    created = client.responses.create(model="anthropic--pause", input="hi", background=True)
    events: list[Any] = []
    try:
        store.heartbeat = starved
        for event in client.responses.retrieve(created.id, stream=True):
            events.append(event)
    finally:
        del store.heartbeat  # the class's own again
    assert events[-1].type == "response.completed"
    assert responses_text(events) == "Hello from the gateway. 你好 — ok!"


def test_a_follower_on_another_replica_outlives_the_owners_stall(
    fake: FakeUpstream,
    access: Capture,
    redis_url: str,  # noqa: F811
) -> None:
    """Replica A's event loop stops for 6.5 s mid-generation; B, following, waits for it."""
    store_url = _fresh_redis(redis_url, 7)
    app_a = create_app(Settings(**_config(fake, store_url)))
    with ServerThread(app_a) as a, ServerThread(create_app(Settings(**_config(fake, store_url)))) as b:
        owner = Gateway(a, app_a.state.gateway)
        created = openai_client(a.url).responses.create(model="anthropic--slow_stream", input="hi", background=True)
        events: list[Any] = []
        for event in openai_client(b.url).responses.retrieve(created.id, stream=True):
            events.append(event)
            if deltas(events) == 3:
                owner.stall(6.5)
        assert events[-1].type == "response.completed"
        assert responses_text(events) == LONG_TEXT


_HOG = "import time\nend = time.time() + 120\nwhile time.time() < end:\n    pass\n"


@pytest.fixture
def cpu_hogs() -> Iterator[None]:
    """Two CPU-bound processes beside the gateway (each ends by itself after 120 s)."""
    hogs = [subprocess.Popen([sys.executable, "-c", _HOG]) for _ in range(2)]
    try:
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait(10)


def test_fifty_resumes_in_a_row_under_load_get_the_whole_text(sqlite_gw: Gateway, cpu_hogs: None) -> None:
    """As in the report: background response, same process, SQLite, two CPU hogs. The caller
    follows it through 50 resumes in a row, each from the last sequence number it saw."""
    client = openai_client(sqlite_gw.url)
    created = client.responses.create(model="anthropic--slow_stream", input="hi", background=True)
    events: list[Any] = []
    for hop in range(50):
        after = events[-1].sequence_number if events else None
        stream = client.responses.retrieve(
            created.id, stream=True, **({} if after is None else {"starting_after": after})
        )
        got = 0
        for event in stream:
            assert event.type != "error"
            events.append(event)
            got += event.type == "response.output_text.delta"
            if got == 8 and hop < 49:
                break
        stream.close()
    assert events[-1].type == "response.completed"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert responses_text(events) == LONG_TEXT


# ---------------------------------------------------------------- item 6: usage in one access-log line and the metrics


def lines_of(capture: Capture, request_id: str, settle: float = 0.3, timeout: float = 15.0) -> list[dict[str, Any]]:
    """The access-log lines of ``request_id``, once one is there (and ``settle`` s more for a second)."""
    deadline = time.monotonic() + timeout
    found: list[dict[str, Any]] = []
    while time.monotonic() < deadline and not found:
        found = [
            line
            for text in list(capture.lines)
            if request_id in text
            for line in [orjson.loads(text)]
            if line.get("request_id") == request_id
        ]
        time.sleep(0.02)
    time.sleep(settle)
    return [
        line
        for text in list(capture.lines)
        if request_id in text
        for line in [orjson.loads(text)]
        if line.get("request_id") == request_id
    ]


def _tokens(gw: Gateway, provider: str) -> dict[str, float]:
    text = httpx.get(gw.url + "/metrics", timeout=10).text
    return {
        kind: metric(text, "gateway_tokens_total", provider=provider, kind=kind)
        for kind in ("input", "output", "cache_read")
    }


def _rid(name: str) -> str:
    return f"req-{name}-{time.monotonic_ns()}"


def test_stored_and_background_usage_is_logged_and_counted_once(gw: Gateway, access: Capture) -> None:
    before = _tokens(gw, "up-anthropic")
    genai, oai = interactions(gw.url), openai_client(gw.url)
    ids = {name: _rid(name) for name in ("whole", "streamed", "background", "stored")}

    whole = genai.interactions.create(model="anthropic--text", input="hi", extra_headers={"x-request-id": ids["whole"]})
    assert whole.usage.total_output_tokens == 12
    streamed = list(
        genai.interactions.create(
            model="anthropic--text", input="hi", stream=True, extra_headers={"x-request-id": ids["streamed"]}
        )
    )
    background = oai.responses.create(
        model="anthropic--text", input="hi", background=True, extra_headers={"x-request-id": ids["background"]}
    )
    stored = oai.responses.create(model="anthropic--text", input="hi", extra_headers={"x-request-id": ids["stored"]})
    assert stored.usage is not None and stored.usage.output_tokens == 12

    for name, rid in ids.items():
        lines = lines_of(access, rid)
        assert len(lines) == 1, (name, lines)
        line = lines[0]
        assert line["provider"] == "up-anthropic" and line["status"] == 200, (name, line)
        # what the caller was told (30 input, of which 10 read from the cache; 12 output) is what is logged
        assert (line["input_tokens"], line["output_tokens"], line["cache_read_tokens"]) == (30, 12, 10), (name, line)
        assert line["stop_reason"] == "stop" and line["error_kind"] is None, (name, line)
    assert lines_of(access, ids["background"])[0]["duration_ms"] >= lines_of(access, ids["background"])[0]["ttfb_ms"]
    after = _tokens(gw, "up-anthropic")
    assert {k: after[k] - before[k] for k in after} == {"input": 120, "output": 48, "cache_read": 40}

    # resumes, replays and GETs of those generations count nothing again
    iid = streamed[0].interaction.id
    list(genai.interactions.get(iid, stream=True))
    list(genai.interactions.get(iid, stream=True, last_event_id=streamed[1].event_id))
    genai.interactions.get(whole.id)
    list(oai.responses.retrieve(background.id, stream=True))
    list(oai.responses.retrieve(background.id, stream=True, starting_after=2))
    assert oai.responses.retrieve(background.id).usage.output_tokens == 12  # type: ignore[union-attr]
    time.sleep(0.3)
    assert _tokens(gw, "up-anthropic") == after
    for rid in ids.values():
        assert len(lines_of(access, rid, settle=0)) == 1


def test_cancelled_cut_and_abandoned_generations_keep_their_usage(gw: Gateway, access: Capture) -> None:
    genai = interactions(gw.url)
    before = _tokens(gw, "up-anthropic")

    # cancelled: the usage the upstream had reported (its message_start: 30 in, 1 out)
    rid = _rid("cancelled")
    created = genai.interactions.create(
        model="anthropic--slow_stream", input="hi", background=True, extra_headers={"x-request-id": rid}
    )
    time.sleep(0.5)
    assert (
        httpx.post(f"{gw.url}/v1beta/interactions/{created.id}/cancel", timeout=10).json()["usage"][
            "total_input_tokens"
        ]
        == 30
    )
    [line] = lines_of(access, rid)
    assert line["error_kind"] == "cancelled" and (line["input_tokens"], line["output_tokens"]) == (30, 1), line

    # cut mid-stream by the upstream: the same
    rid = _rid("cut")
    events = list(
        genai.interactions.create(
            model="anthropic--reset", input="hi", stream=True, extra_headers={"x-request-id": rid}
        )
    )
    assert events[-1].event_type == "error"
    [line] = lines_of(access, rid)
    assert line["error_kind"] and (line["input_tokens"], line["output_tokens"]) == (20 + 10, 1), line

    # the caller drops its stream: the generation goes on, and its line (written when it ends) has all of it
    rid = _rid("abandoned")
    list(
        _take(
            genai.interactions.create(
                model="anthropic--slow_stream", input="hi", stream=True, extra_headers={"x-request-id": rid}
            ),
            4,
        )
    )
    [line] = lines_of(access, rid, timeout=30)
    # 499 when the gateway saw the hang-up before it had written the end (on a loaded machine the
    # whole log may already sit in the socket when the SDK closes it: then it was delivered, 200)
    assert line["status"] in (499, 200) and line["stop_reason"] == "stop" and line["error_kind"] is None, line
    assert (line["input_tokens"], line["output_tokens"]) == (30, 500), line

    after = _tokens(gw, "up-anthropic")
    assert after["input"] - before["input"] == 90 and after["output"] - before["output"] == 502


def test_a_generation_past_max_detached_seconds_ends_in_dialect_with_its_usage(
    fake: FakeUpstream, access: Capture, tmp_path: Any
) -> None:
    config = _config(fake, f"sqlite:///{tmp_path / 'bounded.db'}")
    config["store"]["max_detached_seconds"] = 1.0
    with ServerThread(create_app(Settings(**config))) as server:
        rid, client = _rid("bounded"), interactions(server.url)
        events = list(
            client.interactions.create(
                model="anthropic--slow_stream", input="hi", stream=True, extra_headers={"x-request-id": rid}
            )
        )
        assert len(stream_text(events)) < len(LONG_TEXT)  # cut at 1 s (the whole takes 5 s or more)
        assert events[-1].event_type == "error" and "exceeded 1s" in events[-1].error.message
        [line] = lines_of(access, rid)
        assert line["error_kind"] == "timeout" and (line["input_tokens"], line["output_tokens"]) == (30, 1), line


def test_a_cancelled_generation_keeps_usage_its_upstream_held_back(gw: Gateway, access: Capture) -> None:
    """Gemini states usage on every chunk and the gateway emits it only at the end: a cancel
    mid-way still logs (and shows the caller) the counts of the last chunk that came."""
    client = openai_client(gw.url)
    rid = _rid("gemini-cancelled")
    created = client.responses.create(
        model="gemini--slow_stream", input="hi", background=True, extra_headers={"x-request-id": rid}
    )
    events: list[Any] = []
    for event in client.responses.retrieve(created.id, stream=True):
        events.append(event)
        if deltas(events) == 20:
            threading.Thread(target=lambda: client.responses.cancel(created.id), daemon=True).start()
    final = events[-1].response
    assert final.status == "cancelled" and final.usage.input_tokens == 30
    assert 20 <= final.usage.output_tokens < 500  # candidatesTokenCount of the last chunk read
    [line] = lines_of(access, rid)
    assert line["error_kind"] == "cancelled"
    assert (line["input_tokens"], line["output_tokens"]) == (30, final.usage.output_tokens), line
