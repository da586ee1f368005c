"""Limits and spend across replicas: two gateway processes sharing a real redis-server (and, the
same tests, a Redis Cluster of three masters and three replicas). The budget
holds against 40 concurrent requests over both (the overshoot bound of docs/keys.md "Keys, prices and
budgets"), rpm is one count for both, a revocation on one is seen by the other within a second,
and a store that went away is a 503 in the caller's dialect, never "unlimited"."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.server.app import create_app
from gateway.settings import Settings
from tests.governance.test_keys import ADMIN, EXACT, _raw_call, keyed_config, sha
from tests.support.fake_upstream import FakeUpstream, ServerThread, free_port
from tests.support.processes import start_gateway_process
from tests.support.redis_servers import RedisClusterGroup

ROOT = Path(__file__).resolve().parents[2]
COST = EXACT["openai-responses--text"]  # what one openai-chat--text answer costs (30 in, 10 cached, 12 out)


def _start_redis() -> tuple[subprocess.Popen[bytes], str]:
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed (.ci/run installs the Debian package)")
    port = free_port()
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
    )
    deadline = time.time() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc, f"redis://127.0.0.1:{port}/0"
        except OSError:
            if time.time() > deadline:
                proc.kill()
                raise RuntimeError("redis-server did not start") from None
            time.sleep(0.05)


@pytest.fixture(params=["redis", "cluster"])
def redis_url(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "cluster":
        cluster: RedisClusterGroup = request.getfixturevalue("redis_cluster")
        cluster.flush()
        yield cluster.url
        return
    proc, url = _start_redis()
    yield url
    proc.terminate()
    proc.wait(10)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f'"{k}" = {_toml_value(v)}' for k, v in value.items()) + "}"
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def to_toml(config: dict[str, Any]) -> str:
    lines: list[str] = []
    for section, value in config.items():
        if isinstance(value, list):
            for item in value:
                lines.append(f"[[{section}]]")
                lines += [f"{k} = {_toml_value(v)}" for k, v in item.items()]
        elif section == "prices":
            for glob, rates in value.items():
                lines.append(f'[prices."{glob}"]')
                lines += [f"{k} = {_toml_value(v)}" for k, v in rates.items()]
        else:
            lines.append(f"[{section}]")
            lines += [f"{k} = {_toml_value(v)}" for k, v in value.items()]
    return "\n".join(lines) + "\n"


def gateway_process(
    tmp: Path, fake_port: int, redis: str, name: str, keys: list[dict[str, Any]]
) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    config = keyed_config(fake_port, tmp / "unused.db", keys)
    config["store"] = {"url": redis}
    config["server"] = {**config["server"], "port": port}
    path = tmp / f"{name}.toml"
    path.write_text(to_toml(config))
    return start_gateway_process(path, port, timeout=30)


class Url:
    def __init__(self, url: str) -> None:
        self.url = url


@pytest.fixture
def replicas(fake: FakeUpstream, redis_url: str, tmp_path: Path) -> Iterator[tuple[Url, Url]]:
    keys = [
        {"name": "shared-budget", "key_sha256": sha("shared-budget"), "budget_usd": round(10 * COST, 9)},
        {"name": "shared-rpm", "key_sha256": sha("shared-rpm"), "rpm": 4},
    ]
    procs = [gateway_process(tmp_path, fake.port, redis_url, name, keys) for name in ("a", "b")]
    try:
        yield Url(procs[0][1]), Url(procs[1][1])
    finally:
        for proc, _ in procs:
            proc.terminate()
            proc.wait(10)


def admin(server: Url, method: str, path: str, **kw: Any) -> httpx.Response:
    return httpx.request(method, server.url + path, headers={"authorization": f"Bearer {ADMIN}"}, timeout=10, **kw)


def test_forty_concurrent_requests_over_two_replicas_cannot_overshoot_the_budget(
    replicas: tuple[Url, Url], fake: FakeUpstream
) -> None:
    a, b = replicas
    before = fake.hits.get("openai-chat--text", 0)

    def call(i: int) -> httpx.Response:
        return _raw_call(a if i % 2 else b, "openai-chat", "shared-budget", "openai-chat--text")  # type: ignore[arg-type]

    with ThreadPoolExecutor(40) as pool:
        answers = list(pool.map(call, range(40)))
    ok = [r for r in answers if r.status_code == 200]
    refused = [r for r in answers if r.status_code != 200]
    assert all(r.status_code == 429 and r.json()["error"]["code"] == "insufficient_quota" for r in refused), [
        r.text for r in refused
    ][:3]
    # Each reservation (input estimate + max 20 output tokens) is at least the real cost, so the
    # bound (real cost minus reservation of those in flight) is zero: never more than 10 answered.
    assert 1 <= len(ok) <= 10
    assert fake.hits["openai-chat--text"] - before == len(ok), "refused requests never reached the upstream"
    deadline = time.time() + 5
    while True:
        spent = [admin(s, "GET", "/admin/keys/shared-budget").json()["spend"] for s in (a, b)]
        if spent[0]["held_usd"] == 0 and spent[1]["spent_usd"] == pytest.approx(len(ok) * COST, abs=1e-12):
            break
        assert time.time() < deadline, spent
        time.sleep(0.05)
    assert spent[0]["spent_usd"] == spent[1]["spent_usd"] <= 10 * COST + 1e-12
    # whichever replica is asked, the ledger is the same
    totals = [admin(s, "GET", "/admin/spend?key=shared-budget").json()["total"] for s in (a, b)]
    assert totals[0] == totals[1] and totals[0]["requests"] == len(ok)


def test_rpm_is_one_count_for_all_replicas(replicas: tuple[Url, Url]) -> None:
    a, b = replicas
    statuses = [_raw_call(s, "anthropic", "shared-rpm", "anthropic--text").status_code for s in (a, b, a, b, a, b)]  # type: ignore[arg-type]
    assert statuses == [200, 200, 200, 200, 429, 429]


def test_revocation_is_seen_by_the_other_replica_within_a_second(replicas: tuple[Url, Url]) -> None:
    a, b = replicas
    secret = admin(a, "POST", "/admin/keys", json={"name": "temp", "rpm": 1000}).json()["key"]
    deadline = time.time() + 1.5
    while _raw_call(b, "gemini", secret, "gemini--text").status_code != 200:  # type: ignore[arg-type]
        assert time.time() < deadline, "a key created on one replica is usable on the other within a second"
        time.sleep(0.05)
    assert admin(a, "DELETE", "/admin/keys/temp").status_code == 200
    revoked_at = time.monotonic()
    while True:
        status = _raw_call(b, "gemini", secret, "gemini--text").status_code  # type: ignore[arg-type]
        if status == 401:
            break
        assert status == 200 and time.monotonic() - revoked_at < 1.0, "revocation took longer than a second"
        time.sleep(0.02)
    assert time.monotonic() - revoked_at < 1.0


@pytest.mark.parametrize("dialect", ["anthropic", "openai-chat", "openai-responses", "gemini", "gemini-interactions"])
def test_redis_down_is_503_in_dialect_not_unlimited(fake: FakeUpstream, tmp_path: Path, dialect: str) -> None:
    proc, url = _start_redis()
    config = keyed_config(
        fake.port, tmp_path / "unused.db", [{"name": "capped", "key_sha256": sha("capped"), "rpm": 100}]
    )
    config["store"] = {"url": url}
    try:
        with ServerThread(create_app(Settings(**config))) as server:
            assert _raw_call(server, dialect, "capped", "openai-chat--text").status_code == 200
            proc.terminate()
            proc.wait(10)
            hits = len(fake.received)
            refused = _raw_call(server, dialect, "capped", "openai-chat--text")
            assert refused.status_code == 503, refused.text
            assert "limits" in refused.text and refused.headers["retry-after"] == "1"
            assert "error" in refused.json()
            assert len(fake.received) == hits, "nothing forwarded while limits cannot be checked"
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(10)


# --------------------------------------------------------------------------- issue 28 item 3


def test_a_key_made_on_one_replica_works_on_the_other_at_once(replicas: tuple[Url, Url]) -> None:
    a, b = replicas
    for i in range(3):
        made = admin(a, "POST", "/admin/keys", json={"name": f"fresh-{i}", "rpm": 1000})
        assert made.status_code in (200, 201), made.text
        started = time.monotonic()
        for dialect in ("anthropic", "openai-chat", "gemini"):
            r = _raw_call(b, dialect, made.json()["key"], f"{dialect}--text")  # type: ignore[arg-type]
            assert r.status_code == 200, (dialect, r.text)
        assert time.monotonic() - started < 1.0, "in the same second, not after a poll"


def test_a_key_made_on_one_worker_works_on_another_sharing_the_sqlite_file(fake: FakeUpstream, tmp_path: Path) -> None:
    config = keyed_config(fake.port, tmp_path / "shared.db", [{"name": "seed", "key_sha256": sha("seed")}])
    with ServerThread(create_app(Settings(**config))) as one, ServerThread(create_app(Settings(**config))) as two:
        for i in range(3):
            made = admin(Url(one.url), "POST", "/admin/keys", json={"name": f"fresh-{i}"})
            r = _raw_call(two, "openai-chat", made.json()["key"], "openai-chat--text")
            assert r.status_code == 200, r.text
        assert _raw_call(two, "openai-chat", "never-made", "openai-chat--text").status_code == 401


def test_a_flood_of_bad_keys_makes_bounded_store_reads(fake: FakeUpstream, tmp_path: Path) -> None:
    from gateway.governance.key_lookup import LOOKUPS_PER_SECOND

    config = keyed_config(fake.port, tmp_path / "flood.db", [{"name": "seed", "key_sha256": sha("seed")}])
    app = create_app(Settings(**config))
    with ServerThread(app) as server:
        store = app.state.gateway.auth.store
        reads = 0
        real = store.key_version

        async def counted() -> int:
            nonlocal reads
            reads += 1
            return int(await real())

        store.key_version = counted
        before = len(fake.received)
        started = time.monotonic()
        with httpx.Client() as client, ThreadPoolExecutor(8) as pool:

            def bad(i: int) -> int:
                r = client.post(
                    server.url + "/v1/chat/completions",
                    headers={"authorization": f"Bearer bad-{i % 50}"},  # 50 distinct keys, each four times
                    json={"model": "openai-chat--text", "messages": [{"role": "user", "content": "hi"}]},
                )
                return r.status_code

            statuses = list(pool.map(bad, range(200)))
        elapsed = time.monotonic() - started
        assert set(statuses) == {401}
        assert len(fake.received) == before
        # the poll reads the version every REFRESH_SECONDS too
        bound = LOOKUPS_PER_SECOND * (elapsed + 1) + 2 * (elapsed / 0.5 + 1)
        assert reads <= bound, (reads, elapsed)
        assert app.state.gateway.auth.unknown.reloads <= LOOKUPS_PER_SECOND * (elapsed + 1)
        # a good key still works during and after the flood
        assert _raw_call(server, "openai-chat", "seed", "openai-chat--text").status_code == 200
