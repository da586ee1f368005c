"""Configuration loading, env overrides, routing and the CLI's check-config."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gateway.errors import GatewayError
from gateway.routing.router import Router
from gateway.settings import Settings, load_settings

ROOT = Path(__file__).resolve().parents[1]


def test_example_config_loads_and_routes() -> None:
    settings = load_settings(ROOT / "config" / "gateway.example.toml")
    router = Router(settings)
    smart = router.resolve("smart")
    assert [(t.provider, t.upstream_model) for t in smart.targets] == [
        ("claude", "claude-sonnet-4-5"),
        ("openai", "gpt-4.1"),
    ]
    assert router.resolve("claude-opus-4-1").targets[0].provider == "claude"
    assert router.resolve("claude-opus-4-1").targets[0].upstream_model == "claude-opus-4-1"
    assert router.resolve("openai/gpt-4o-mini").targets[0].upstream_model == "gpt-4o-mini"
    with pytest.raises(GatewayError) as info:
        router.resolve("unknown-model")
    assert info.value.status == 404


def test_env_overrides_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GATEWAY_SERVER__PORT", "9123")
    settings = load_settings(ROOT / "config" / "gateway.example.toml")
    assert settings.server.port == 9123


def test_embedded_default_is_demo_plus_env_providers(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GATEWAY_CONFIG", raising=False)
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    assert [p.name for p in load_settings().providers] == ["demo"]
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    settings = load_settings()
    assert [p.name for p in settings.providers] == ["demo", "anthropic"]
    assert Router(settings).resolve("claude-sonnet-4-5").targets[0].provider == "anthropic"


# A provider named like a wire word ("type") and a model called "text": names are data, never syntax.
_DEMO = {"name": "type", "dialect": "demo"}
_KEY = {"name": "ci", "key_sha256": "ab" * 32}

BAD_SETTINGS = {
    "duplicate provider names": {"providers": [_DEMO, _DEMO], "routes": []},
    "needs either provider or targets": {"providers": [_DEMO], "routes": [{"model": "text"}]},
    "needs either provider or targets (not both)": {
        "providers": [_DEMO],
        "routes": [{"model": "text", "provider": "type", "targets": [{"provider": "type"}]}],
    },
    "refers to unknown provider 'nope'": {"providers": [_DEMO], "routes": [{"model": "text", "provider": "nope"}]},
    "refers to unknown provider 'gone'": {
        "providers": [_DEMO],
        "routes": [{"model": "text", "targets": [{"provider": "gone"}]}],
    },
    "every target has weight 0": {
        "providers": [_DEMO],
        "routes": [
            {"model": "text", "targets": [{"provider": "type", "weight": 0}, {"provider": "type", "weight": 0}]}
        ],
    },
    "fallback 'nope:m' refers to unknown provider": {
        "providers": [_DEMO],
        "routes": [{"model": "text", "provider": "type", "fallbacks": ["nope:m"]}],
    },
    "duplicate key names": {"providers": [_DEMO], "keys": [_KEY, _KEY]},
    "needs exactly one of key_env or key_sha256": {"providers": [_DEMO], "keys": [{**_KEY, "key_env": "CI_KEY"}]},
    "key 'bare' needs exactly one": {"providers": [_DEMO], "keys": [{"name": "bare"}]},
    "needs a base_url": {"providers": [{"name": "up", "dialect": "openai-chat"}], "routes": []},
}


@pytest.mark.parametrize("message", list(BAD_SETTINGS))
def test_settings_built_in_code_are_checked_like_a_file(message: str) -> None:
    """``Settings(...)`` runs the cross-checks itself: not only ``load_settings`` (issue 15)."""
    from pydantic import ValidationError

    with pytest.raises(ValidationError) as info:
        Settings(**BAD_SETTINGS[message])
    assert message in str(info.value)


@pytest.mark.parametrize("message", ["duplicate provider names", "every target has weight 0", "needs a base_url"])
def test_a_loaded_file_fails_with_the_same_message(message: str, tmp_path: Path) -> None:
    import tomllib

    tomli = _toml(BAD_SETTINGS[message])
    assert tomllib.loads(tomli) == {k: v for k, v in BAD_SETTINGS[message].items() if v}
    path = tmp_path / "bad.toml"
    path.write_text(tomli)
    with pytest.raises(ValueError, match=message):
        load_settings(path)


def _toml(data: dict[str, list[dict[str, object]]]) -> str:
    """The tables above as TOML arrays of tables (flat values and lists of tables only)."""

    def value(v: object) -> str:
        if isinstance(v, str):
            return f'"{v}"'
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        if isinstance(v, dict):
            return "{" + ", ".join(f"{k} = {value(x)}" for k, x in v.items()) + "}"
        return str(v)

    out = []
    for table, rows in data.items():
        for row in rows:
            out.append(f"[[{table}]]")
            out += [f"{k} = {value(v)}" for k, v in row.items()]
    return "\n".join(out) + "\n"


def test_good_settings_built_in_code_pass() -> None:
    settings = Settings(
        providers=[_DEMO],
        routes=[
            {
                "model": "text",
                "targets": [{"provider": "type", "weight": 0}, {"provider": "type"}],
                "fallbacks": ["type:m"],
            }
        ],
        keys=[_KEY],
    )
    assert [r.model for r in settings.routes] == ["text"]


def test_check_config_cli(tmp_path: Path) -> None:
    ok = subprocess.run(
        [
            sys.executable,
            "-m",
            "gateway",
            "check-config",
            str(ROOT / "config" / "gateway.example.toml"),
            "--model",
            "claude-x",
        ],
        capture_output=True,
        text=True,
    )
    assert ok.returncode == 0, ok.stderr
    assert "claude-x resolves via 'claude-*' to claude:claude-x" in ok.stdout
    bad = tmp_path / "bad.toml"
    bad.write_text('[[providers]]\nname = "x"\ndialect = "nope"\n')
    result = subprocess.run([sys.executable, "-m", "gateway", "check-config", str(bad)], capture_output=True, text=True)
    assert result.returncode == 1
    assert "invalid config" in result.stderr


def test_provider_proxy_must_be_an_http_url_and_stays_secret() -> None:
    from pydantic import ValidationError

    from gateway.settings import ProviderSettings

    with pytest.raises(ValidationError, match='SOCKS or https:// proxy needs transport = "httpx"'):
        ProviderSettings(name="p", dialect="anthropic", proxy="socks5://127.0.0.1:1080")
    with pytest.raises(ValidationError, match="proxy must be an http"):
        ProviderSettings(name="p", dialect="anthropic", proxy="ftp://127.0.0.1:21")
    ok = ProviderSettings(name="p", dialect="anthropic", proxy="http://user:hunter2@127.0.0.1:3128")
    assert "hunter2" not in repr(ok) and "hunter2" not in str(ok.model_dump())


@pytest.mark.parametrize(
    "broken",
    [
        '[[providers]]\nname = "a"\ndialect = "openai-chat"\nbase_url = "http://x"\nproxy = "ftp://x"\napi_key = "sk-INLINE-SECRET"\n',
        '[[routes]]\nmodel = "text"\nprovider = "nope"\n[[providers]]\nname = "a"\ndialect = "openai-chat"\nbase_url = "http://x"\napi_key = "sk-INLINE-SECRET"\n',
    ],
    ids=["field-rule", "cross-check"],
)
def test_a_config_error_never_echoes_a_value(broken: str, tmp_path: Path) -> None:
    """pydantic shows the input beside a failed rule: for a provider that is its inline api_key."""
    from pydantic import ValidationError

    path = tmp_path / "bad.toml"
    path.write_text(broken)
    with pytest.raises(ValidationError) as info:
        load_settings(path)
    assert "sk-INLINE-SECRET" not in str(info.value)
    result = subprocess.run(
        [sys.executable, "-m", "gateway", "check-config", str(path)], capture_output=True, text=True
    )
    assert result.returncode == 1 and "invalid config" in result.stderr
    assert "sk-INLINE-SECRET" not in result.stderr + result.stdout
