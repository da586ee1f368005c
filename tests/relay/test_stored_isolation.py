"""Stored responses and interactions are their caller key's own.

Two named keys (``[[keys]]``) and a plain ``[auth]`` key share one gateway, on a SQLite file and on
a real redis-server. For every object key A stores, key B (and the shared plain key) gets, for
every operation by id — ``GET``, ``DELETE``, cancel, ``input_items``, a stream resume, and
chaining with ``previous_response_id`` / ``previous_interaction_id`` — exactly the answer for an
id that does not exist, and nothing reaches the upstream; A's objects and running generations are
untouched and still work for A. Without named keys everything works as before. Responses through
the official openai SDK, Interactions through raw httpx.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import openai
import orjson
import pytest
import redis as redis_lib

from gateway.server.app import create_app
from gateway.settings import Settings
from tests.conftest import gateway_config
from tests.relay.test_stateful import LONG_TEXT, redis_url, responses_text  # noqa: F401  (redis_url: fixture)
from tests.support.callers import openai_client
from tests.support.fake_upstream import FakeUpstream, ServerThread

A, B, SHARED = "sk-team-a", "sk-team-b", "sk-shared-plain"
ADMIN = "admin-secret-isolation"
TEXT = "text"  # a model named like a wire word: the fake's quick answer
SLOW = "status"  # likewise: the fake's slow 500-word answer, still running while B tries
HELLO = "Hello from the gateway. 你好 — ok!"


def sha(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _config(
    fake: FakeUpstream, store_url: str, *, named: bool = True, plain: list[str] | None = None
) -> dict[str, Any]:
    config = gateway_config(f"http://127.0.0.1:{fake.port}")
    config["store"] = {"url": store_url}
    config["routes"] = [
        {"model": TEXT, "provider": "up-anthropic", "upstream_model": "anthropic--text"},
        {"model": SLOW, "provider": "up-openai-chat", "upstream_model": "openai-chat--slow_stream"},
        *config["routes"],
    ]
    if named:
        config["keys"] = [{"name": "team-a", "key_sha256": sha(A)}, {"name": "team-b", "key_sha256": sha(B)}]
        config["admin"] = {"key": ADMIN}
    if plain is not None:
        config["auth"] = {"keys_env": "", "keys": plain}
    return config


@dataclass
class Gateway:
    server: ServerThread
    fake: FakeUpstream

    @property
    def url(self) -> str:
        return self.server.url

    def upstream_calls(self) -> int:
        return len(self.fake.received)


@pytest.fixture(scope="module", params=["sqlite", "redis"])
def gw(
    request: pytest.FixtureRequest, fake: FakeUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Gateway]:
    if request.param == "sqlite":
        store_url = f"sqlite:///{tmp_path_factory.mktemp('isolation') / 'gateway.db'}"
    else:
        store_url = request.getfixturevalue("redis_url").rsplit("/", 1)[0] + "/7"
        with redis_lib.Redis.from_url(store_url) as client:
            client.flushdb()
    with ServerThread(create_app(Settings(**_config(fake, store_url, plain=[SHARED])))) as server:
        yield Gateway(server, fake)


def unknown(prefix: str) -> str:
    return prefix + secrets.token_urlsafe(18).replace("-", "x").replace("_", "y")


def call(url: str, key: str, method: str, path: str, **kw: Any) -> httpx.Response:
    headers = {"authorization": f"Bearer {key}"} if path.startswith("/v1/") else {"x-goog-api-key": key}
    return httpx.request(method, url + path, headers=headers, timeout=20, **kw)


def answer(response: httpx.Response, sid: str) -> tuple[int, bytes]:
    """Status and body with the id replaced: what an answer says apart from which id was asked."""
    return response.status_code, response.read().replace(sid.encode(), b"<id>")


# ---------------------------------------------------------------- Responses (openai SDK)

NOT_FOUND_RESPONSE = {
    "message": "No response found with id '<id>'.",
    "type": "invalid_request_error",
    "param": None,
    "code": None,
}
NO_PREVIOUS_RESPONSE = {
    "message": "Previous response with id '<id>' not found.",
    "type": "invalid_request_error",
    "param": "previous_response_id",
    "code": "previous_response_not_found",
}


def error_of(exc: openai.APIStatusError, sid: str) -> tuple[int, dict[str, Any]]:
    body = orjson.loads(exc.response.content.replace(sid.encode(), b"<id>"))
    return exc.status_code, body["error"]


def test_a_stored_response_is_its_keys_own(gw: Gateway) -> None:
    a, b, shared = openai_client(gw.url, A), openai_client(gw.url, B), openai_client(gw.url, SHARED)
    created = a.responses.create(model=TEXT, input=[{"role": "user", "content": "What is the type of text?"}])
    assert created.output_text == HELLO
    nobody = unknown("resp_")
    before = gw.upstream_calls()
    for other in (b, shared):
        for sid in (created.id, nobody):  # another key's id answers exactly as an id that does not exist
            with pytest.raises(openai.NotFoundError) as got:
                other.responses.retrieve(sid)
            assert error_of(got.value, sid) == (404, NOT_FOUND_RESPONSE)
            with pytest.raises(openai.NotFoundError) as got:
                list(other.responses.input_items.list(sid))
            assert error_of(got.value, sid) == (404, NOT_FOUND_RESPONSE)
            with pytest.raises(
                openai.NotFoundError
            ) as got:  # not "only background ones can be cancelled": that would tell it exists
                other.responses.cancel(sid)
            assert error_of(got.value, sid) == (404, NOT_FOUND_RESPONSE)
            with pytest.raises(openai.NotFoundError) as got:
                other.responses.delete(sid)
            assert error_of(got.value, sid) == (404, NOT_FOUND_RESPONSE)
            with pytest.raises(openai.BadRequestError) as refused:
                other.responses.create(model=TEXT, previous_response_id=sid, input="and then?")
            assert error_of(refused.value, sid) == (400, NO_PREVIOUS_RESPONSE)
            with pytest.raises(openai.BadRequestError) as refused:  # counting a turn reads the history too
                other.responses.input_tokens.count(model=TEXT, previous_response_id=sid, input="and then?")
            assert error_of(refused.value, sid) == (400, NO_PREVIOUS_RESPONSE)
        for method, path in (
            ("GET", ""),
            ("GET", "?stream=true"),
            ("DELETE", ""),
            ("POST", "/cancel"),
            ("GET", "/input_items"),
        ):
            mine = call(gw.url, SHARED if other is shared else B, method, f"/v1/responses/{created.id}{path}")
            theirs = call(gw.url, SHARED if other is shared else B, method, f"/v1/responses/{nobody}{path}")
            assert answer(mine, created.id) == answer(theirs, nobody), (method, path)
    assert gw.upstream_calls() == before, "nothing of a refused request reaches the upstream"
    # the admin key is not a caller key
    assert call(gw.url, ADMIN, "GET", f"/v1/responses/{created.id}").status_code == 401
    # A's response is untouched and still A's to read, list, continue and delete
    assert a.responses.retrieve(created.id).output_text == HELLO
    items = list(a.responses.input_items.list(created.id))
    assert [i.content[0].text for i in items] == ["What is the type of text?"]
    second = a.responses.create(model=TEXT, previous_response_id=created.id, input="and then?")
    assert second.output_text == HELLO
    sent = gw.fake.last("anthropic").body["messages"]
    assert len(sent) == 3, "the stored history of A's first turn went upstream with A's second"
    assert (
        a.responses.input_tokens.count(model=TEXT, previous_response_id=created.id, input="and then?").input_tokens > 0
    )
    a.responses.delete(created.id)  # (the SDK returns nothing)
    with pytest.raises(openai.NotFoundError):
        a.responses.retrieve(created.id)
    # and B's own are B's
    own = b.responses.create(model=TEXT, input="mine")
    assert b.responses.retrieve(own.id).output_text == HELLO
    with pytest.raises(openai.NotFoundError):
        a.responses.retrieve(own.id)


def test_a_background_response_is_its_keys_own_while_it_runs(gw: Gateway) -> None:
    a, b = openai_client(gw.url, A), openai_client(gw.url, B)
    running = a.responses.create(model=SLOW, input="hi", background=True)
    assert running.status in ("queued", "in_progress")
    before = gw.upstream_calls()
    with pytest.raises(openai.NotFoundError) as got:
        b.responses.retrieve(running.id, stream=True)
    assert error_of(got.value, running.id) == (404, NOT_FOUND_RESPONSE)
    with pytest.raises(openai.NotFoundError) as got:
        b.responses.retrieve(running.id, stream=True, starting_after=3)
    assert error_of(got.value, running.id) == (404, NOT_FOUND_RESPONSE)
    with pytest.raises(openai.NotFoundError), b.responses.stream(response_id=running.id, starting_after=3) as stream:
        list(stream)
    with pytest.raises(openai.NotFoundError):
        b.responses.cancel(running.id)
    with pytest.raises(openai.NotFoundError):
        b.responses.delete(running.id)
    with pytest.raises(openai.NotFoundError):
        b.responses.retrieve(running.id)
    assert gw.upstream_calls() == before
    # B's cancel and delete stopped nothing: A follows its generation to the end
    with a.responses.stream(response_id=running.id, starting_after=3) as stream:
        rest = list(stream)
    assert rest[0].sequence_number == 4 and rest[-1].type == "response.completed"
    events = list(a.responses.retrieve(running.id, stream=True))
    assert responses_text(events) == LONG_TEXT
    assert a.responses.retrieve(running.id).status == "completed"
    # a running one is cancelled by its own key
    again = a.responses.create(model=SLOW, input="hi", background=True)
    assert a.responses.cancel(again.id).status == "cancelled"


# ---------------------------------------------------------------- Interactions (raw httpx)


def _create(url: str, key: str, **body: Any) -> dict[str, Any]:
    response = call(url, key, "POST", "/v1beta/interactions", json={"model": TEXT, "input": "hi", **body})
    assert response.status_code == 200, response.text
    created: dict[str, Any] = orjson.loads(response.content)
    return created


def _output(obj: dict[str, Any]) -> str:
    return "".join(c["text"] for s in obj["steps"] if s["type"] == "model_output" for c in s["content"])


def _events(body: bytes) -> list[dict[str, Any]]:
    return [
        orjson.loads(line[6:]) for line in body.split(b"\n") if line.startswith(b"data: {")
    ]  # (not the closing [DONE])


def _text(events: list[dict[str, Any]]) -> str:
    return "".join(
        e["delta"]["text"] for e in events if e.get("event_type") == "step.delta" and e["delta"].get("type") == "text"
    )


def _refused_like_unknown(gw: Gateway, key: str, iid: str, operations: list[tuple[str, str]]) -> None:
    nobody = unknown("v1_")
    for method, path in operations:
        mine = call(gw.url, key, method, f"/v1beta/interactions/{iid}{path}")
        theirs = call(gw.url, key, method, f"/v1beta/interactions/{nobody}{path}")
        assert mine.status_code == 404, (method, path, mine.text)
        assert answer(mine, iid) == answer(theirs, nobody), (method, path)
        assert orjson.loads(mine.content)["error"]["code"] == "not_found"


OPERATIONS = [
    ("GET", ""),
    ("GET", "?stream=true"),
    ("GET", "?stream=true&last_event_id=evt_1"),
    ("POST", "/cancel"),
    ("DELETE", ""),
]


def test_a_stored_interaction_is_its_keys_own(gw: Gateway) -> None:
    created = _create(gw.url, A, system_instruction="Say what the type is.")
    iid = created["id"]
    assert _output(created) == HELLO
    before = gw.upstream_calls()
    for other in (B, SHARED):
        _refused_like_unknown(gw, other, iid, OPERATIONS)
        nobody = unknown("v1_")
        chained = call(
            gw.url,
            other,
            "POST",
            "/v1beta/interactions",
            json={"model": TEXT, "input": "and?", "previous_interaction_id": iid},
        )
        never = call(
            gw.url,
            other,
            "POST",
            "/v1beta/interactions",
            json={"model": TEXT, "input": "and?", "previous_interaction_id": nobody},
        )
        assert chained.status_code == 404 and answer(chained, iid) == answer(never, nobody)
    assert gw.upstream_calls() == before
    # A's interaction is untouched: A reads, replays, continues and deletes it
    assert _output(orjson.loads(call(gw.url, A, "GET", f"/v1beta/interactions/{iid}").content)) == HELLO
    replay = call(gw.url, A, "GET", f"/v1beta/interactions/{iid}?stream=true")
    assert replay.status_code == 200 and _text(_events(replay.content)) == HELLO
    second = _create(gw.url, A, previous_interaction_id=iid, input="and?")
    assert _output(second) == HELLO
    assert gw.fake.last("anthropic").body["system"][0]["text"] == "Say what the type is."
    assert call(gw.url, A, "DELETE", f"/v1beta/interactions/{iid}").status_code == 200
    assert call(gw.url, A, "GET", f"/v1beta/interactions/{iid}").status_code == 404


def test_a_running_interaction_is_its_keys_own(gw: Gateway) -> None:
    headers = {"x-goog-api-key": A}
    seen: list[dict[str, Any]] = []
    with httpx.stream(
        "POST",
        gw.url + "/v1beta/interactions",
        headers=headers,
        json={"model": SLOW, "input": "hi", "stream": True},
        timeout=20,
    ) as r:
        buffer = b""
        for chunk in r.iter_bytes():
            buffer += chunk
            *frames, buffer = buffer.split(b"\n\n")
            seen += [e for f in frames for e in _events(f + b"\n")]
            if sum(1 for e in seen if e.get("event_type") == "step.delta") >= 5:
                break  # A's connection drops; the generation goes on
    iid, last = seen[0]["interaction"]["id"], seen[-1]["event_id"]
    before = gw.upstream_calls()
    _refused_like_unknown(
        gw, B, iid, [("GET", f"?stream=true&last_event_id={last}"), ("POST", "/cancel"), ("DELETE", ""), ("GET", "")]
    )
    assert gw.upstream_calls() == before
    rest = call(gw.url, A, "GET", f"/v1beta/interactions/{iid}?stream=true&last_event_id={last}")
    tail = _events(rest.content)
    assert _text(seen) + _text(tail) == LONG_TEXT
    assert tail[-1]["event_type"] == "interaction.completed" and tail[-1]["interaction"]["status"] == "completed"


# ---------------------------------------------------------------- the name is the identity


def test_a_key_rotated_under_the_same_name_keeps_its_objects(gw: Gateway) -> None:
    def admin(method: str, path: str, **kw: Any) -> httpx.Response:
        return httpx.request(method, gw.url + path, headers={"authorization": f"Bearer {ADMIN}"}, timeout=10, **kw)

    name = "rotating-" + secrets.token_hex(3)
    old = admin("POST", "/admin/keys", json={"name": name}).json()["key"]
    created = openai_client(gw.url, old).responses.create(model=TEXT, input="hi")
    iid = _create(gw.url, old)["id"]
    assert admin("DELETE", f"/admin/keys/{name}").json()["revoked"] is True
    new = admin("POST", "/admin/keys", json={"name": name}).json()["key"]
    assert new != old
    with pytest.raises(openai.AuthenticationError):
        openai_client(gw.url, old).responses.retrieve(created.id)
    assert openai_client(gw.url, new).responses.retrieve(created.id).output_text == HELLO
    assert call(gw.url, new, "GET", f"/v1beta/interactions/{iid}").status_code == 200
    with pytest.raises(openai.NotFoundError):
        openai_client(gw.url, A).responses.retrieve(created.id)


# ---------------------------------------------------------------- without named keys: as before


def test_without_named_keys_every_caller_shares_the_stored_objects(fake: FakeUpstream, tmp_path: Path) -> None:
    """Open access, then the plain ``[auth]`` list (two different plain keys are one shared key)."""
    for plain in (None, ["sk-plain-1", "sk-plain-2"]):
        db = tmp_path / f"shared-{bool(plain)}.db"
        with ServerThread(create_app(Settings(**_config(fake, f"sqlite:///{db}", named=False, plain=plain)))) as server:
            one, two = plain or ["anything", "anything"]
            first = openai_client(server.url, one).responses.create(model=TEXT, input="hi")
            other = openai_client(server.url, two)
            assert other.responses.retrieve(first.id).output_text == HELLO
            assert len(list(other.responses.input_items.list(first.id))) == 1
            assert other.responses.create(model=TEXT, previous_response_id=first.id, input="and?").output_text == HELLO
            running = other.responses.create(model=SLOW, input="hi", background=True)
            assert openai_client(server.url, one).responses.cancel(running.id).status == "cancelled"
            other.responses.delete(first.id)
            with pytest.raises(openai.NotFoundError):
                openai_client(server.url, one).responses.retrieve(first.id)
            iid = _create(server.url, one)["id"]
            assert call(server.url, two, "GET", f"/v1beta/interactions/{iid}?stream=true").status_code == 200
            assert _output(_create(server.url, two, previous_interaction_id=iid)) == HELLO
            assert call(server.url, two, "DELETE", f"/v1beta/interactions/{iid}").status_code == 200


def test_records_without_an_owner_are_the_shared_keys(fake: FakeUpstream, tmp_path: Path) -> None:
    """What a gateway stored before owners were kept (or without named keys) carries no owner: it
    stays the shared key's after named keys are configured, and no named key can see it."""
    db = f"sqlite:///{tmp_path / 'legacy.db'}"
    with ServerThread(create_app(Settings(**_config(fake, db, named=False)))) as server:
        old = openai_client(server.url).responses.create(model=TEXT, input="hi")
        iid = _create(server.url, "anything")["id"]
    assert not any(b"key_name" in row for row in stored_rows(db)), "a shared key's record is stored as before"
    with ServerThread(create_app(Settings(**_config(fake, db, plain=[SHARED])))) as server:
        with pytest.raises(openai.NotFoundError):
            openai_client(server.url, A).responses.retrieve(old.id)
        assert call(server.url, A, "GET", f"/v1beta/interactions/{iid}").status_code == 404
        assert openai_client(server.url, SHARED).responses.retrieve(old.id).output_text == HELLO
        assert call(server.url, SHARED, "GET", f"/v1beta/interactions/{iid}").status_code == 200
        mine = openai_client(server.url, A).responses.create(model=TEXT, input="hi")
    assert any(re.search(rb'"key_name":\s*"team-a"', row) and mine.id.encode() in row for row in stored_rows(db)), (
        "a named key's record names it"
    )


def stored_rows(url: str) -> list[bytes]:
    """Every row of the SQLite store's tables, as bytes (to look at what is stored)."""
    import sqlite3

    rows: list[bytes] = []
    with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
        for (table,) in conn.execute("select name from sqlite_master where type='table'").fetchall():
            for row in conn.execute(f'select * from "{table}"'):
                rows.append(
                    b" ".join(
                        c.encode() if isinstance(c, str) else c if isinstance(c, bytes) else str(c).encode()
                        for c in row
                    )
                )
    return rows
