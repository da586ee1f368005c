"""``GATEWAY_*`` variables that are not settings (issue 28 item 0): the caller keys in ``GATEWAY_KEYS`` (the
default ``[auth] keys_env``), the admin key, ``GATEWAY_CONFIG`` — every documented name — leave the config
alone, so ``check-config``, ``python -m gateway serve`` (``make run``) and the compose services start, and the
keys in those variables authenticate."""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest
import yaml

from gateway.settings import Settings, load_settings
from tests.support.fake_upstream import free_port

ROOT = Path(__file__).resolve().parents[1]
CONTRACT = ROOT.parent.parent / "shared" / "CONTRACT.md"  # the shared contract, when this checkout has one
_NAME = re.compile(r"\bGATEWAY_[A-Z0-9_]*[A-Z0-9]")


def documented_names() -> set[str]:
    """Every ``GATEWAY_*`` name the shipped files mention: compose, Dockerfile, Makefile, the example config,
    README, docs/, CONTRACT.md."""
    files = [ROOT / "docker-compose.yml", ROOT / "Dockerfile", ROOT / "Makefile", ROOT / "README.md"]
    files += sorted((ROOT / "config").glob("*.toml")) + sorted((ROOT / "docs").glob("**/*.md"))
    files += [CONTRACT] if CONTRACT.exists() else []
    return {name for path in files for name in _NAME.findall(path.read_text())}


def test_the_documented_names_include_the_ones_that_collided() -> None:
    assert {"GATEWAY_KEYS", "GATEWAY_ADMIN_KEY", "GATEWAY_CONFIG"} <= documented_names()


def test_no_bare_gateway_name_is_read_as_a_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every documented name that is not a nested setting, and ``GATEWAY_<SECTION>`` of every top-level
    section, set to a value no section or list parses: the settings are those of the file alone."""
    example = ROOT / "config" / "gateway.example.toml"
    plain = load_settings(example)
    bare = {n for n in documented_names() if "__" not in n} | {f"GATEWAY_{f.upper()}" for f in Settings.model_fields}
    bare.discard("GATEWAY_CONFIG")  # names the file; the loader reads it by name (set to the file here)
    for name in bare:
        monkeypatch.setenv(name, "k1,k2")
    monkeypatch.setenv("GATEWAY_CONFIG", str(example))
    assert load_settings(example).model_dump() == plain.model_dump()
    assert load_settings().model_dump() == plain.model_dump()


def test_nested_overrides_still_apply_but_never_to_a_variable_a_key_env_names(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config = tmp_path / "gateway.toml"
    config.write_text(
        '[[providers]]\nname = "text"\ndialect = "demo"\n\n'
        '[[routes]]\nmodel = "text"\nprovider = "text"\n\n'
        '[admin]\nkey_env = "GATEWAY_ADMIN__KEY"\n\n'
        '[[keys]]\nname = "ci"\nkey_env = "GATEWAY_KEYS__CI"\n'
    )
    monkeypatch.setenv("GATEWAY_SERVER__PORT", "9123")
    monkeypatch.setenv("GATEWAY_ADMIN__KEY", "adm-secret")  # the admin key by name, not admin.key
    monkeypatch.setenv("GATEWAY_KEYS__CI", "ci-secret")  # would be an item of the [[keys]] list
    monkeypatch.setenv("GATEWAY_AUTH__KEYS_ENV", "GATEWAY_AUTH__CALLERS")  # an override naming a variable
    monkeypatch.setenv("GATEWAY_AUTH__CALLERS", "c1")
    settings = load_settings(config)
    assert settings.server.port == 9123
    assert settings.admin.key is None and settings.admin.resolved_key() == "adm-secret"
    assert [k.name for k in settings.keys] == ["ci"] and settings.keys[0].key_env == "GATEWAY_KEYS__CI"
    assert settings.auth.keys_env == "GATEWAY_AUTH__CALLERS" and settings.auth.resolved_keys() == ["c1"]


def test_check_config_with_every_documented_name_set() -> None:
    env = _base_env() | {name: "k1,k2" for name in documented_names() if "__" not in name}
    env.pop("GATEWAY_CONFIG")
    done = subprocess.run(
        [sys.executable, "-m", "gateway", "check-config", str(ROOT / "config" / "gateway.example.toml")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "config OK" in done.stdout


def _base_env() -> dict[str, str]:
    """What any process needs to start, and nothing of this test run's own GATEWAY_* or provider keys."""
    return {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}


def _serve(cwd: Path, env: dict[str, str], port: int) -> Iterator[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "gateway", "serve", "--host", "127.0.0.1", "--port", str(port)],
        cwd=cwd,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 30
        while True:
            if proc.poll() is not None:
                pytest.fail(f"the gateway exited {proc.returncode}: {proc.stderr.read().decode()[-2000:]}")  # type: ignore[union-attr]
            try:
                if httpx.get(url + "/healthz", timeout=0.5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.time() > deadline:
                pytest.fail("the gateway did not answer /healthz")
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=15)


def _callers_authenticate(url: str, keys: list[str]) -> None:
    for key in keys:
        reply = openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0).chat.completions.create(
            model="demo", messages=[{"role": "user", "content": "hi"}]
        )
        assert reply.choices[0].message.content
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=url + "/v1", api_key="not-a-key", max_retries=0).chat.completions.create(
            model="demo", messages=[{"role": "user", "content": "hi"}]
        )


def test_make_run_with_the_caller_and_admin_keys_in_the_environment(tmp_path: Path) -> None:
    """``make run`` is ``python -m gateway serve`` in the checkout: config/gateway.toml (here: the example's
    demo provider and an admin key by its documented name), GATEWAY_KEYS and GATEWAY_ADMIN_KEY set."""
    port = free_port()
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "gateway.toml").write_text(
        '[[providers]]\nname = "demo"\ndialect = "demo"\n\n[[routes]]\nmodel = "demo"\nprovider = "demo"\n\n'
        '[admin]\nkey_env = "GATEWAY_ADMIN_KEY"\n\n[store]\nurl = "sqlite:///state.db"\n'
    )
    env = _base_env() | {"GATEWAY_KEYS": "k1,k2", "GATEWAY_ADMIN_KEY": "adm-1"}
    for url in _serve(tmp_path, env, port):
        _callers_authenticate(url, ["k1", "k2"])
        admin = httpx.get(url + "/admin/keys", headers={"authorization": "Bearer adm-1"}, timeout=10)
        assert admin.status_code == 200
        assert httpx.get(url + "/admin/keys", headers={"authorization": "Bearer k1"}, timeout=10).status_code == 401


@pytest.fixture(scope="module")
def redis_host() -> Iterator[str]:
    """A real redis-server standing in for compose's ``redis`` service (host:port)."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed")
    port = free_port()
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--save", "", "--appendonly", "no"], stdout=subprocess.DEVNULL
    )
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.05)
    yield f"127.0.0.1:{port}"
    proc.terminate()
    proc.wait(timeout=10)


def _image_env() -> dict[str, str]:
    """The Dockerfile's ENV lines (``ENV A=1 B=2``)."""
    env: dict[str, str] = {}
    for line in (ROOT / "Dockerfile").read_text().splitlines():
        if line.startswith("ENV "):
            env |= dict(pair.split("=", 1) for pair in line[4:].split())
    return env


def _interpolate(value: str, shell: dict[str, str]) -> str:
    """Compose's ``${NAME:-default}`` against the caller's shell."""
    return re.sub(r"\$\{(\w+):-([^}]*)\}", lambda m: shell.get(m.group(1)) or m.group(2), value)


@pytest.mark.parametrize("service", ["gateway", "gateway-replica"])
def test_compose_service_environment_starts_and_its_keys_authenticate(
    service: str, tmp_path: Path, redis_host: str
) -> None:
    """The service's environment exactly as compose gives it (the image's ENV, then the service's
    ``environment:`` with the shell's GATEWAY_KEYS=k1,k2), plus GATEWAY_ADMIN_KEY; the mounted ./config; the
    paths and hosts of the container (/app/state, the ``redis`` service) mapped to this machine."""
    spec = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"][service]
    assert spec["build"] == "."
    shell = {"GATEWAY_KEYS": "k1,k2"}
    env = _image_env() | {name: _interpolate(str(value), shell) for name, value in spec["environment"].items()}
    assert env["GATEWAY_KEYS"] == "k1,k2"
    env["GATEWAY_ADMIN_KEY"] = "adm-1"
    env = {
        k: v.replace("/app/state", str(tmp_path)).replace("redis://redis:6379", f"redis://{redis_host}")
        for k, v in env.items()
    }
    app = tmp_path / "app"
    shutil.copytree(ROOT / "config", app / "config")  # the ./config:/app/config mount
    for url in _serve(app, _base_env() | env, free_port()):
        _callers_authenticate(url, ["k1", "k2"])
