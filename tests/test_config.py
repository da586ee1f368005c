"""Configuration loading, env overrides, routing and the CLI's check-config."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gateway.errors import GatewayError
from gateway.router import Router
from gateway.settings import Settings, load_settings

ROOT = Path(__file__).resolve().parents[1]


def test_example_config_loads_and_routes() -> None:
    settings = load_settings(ROOT / "config" / "gateway.example.toml")
    router = Router(settings)
    smart = router.resolve("smart")
    assert [(t.provider, t.upstream_model) for t in smart.targets] == [("claude", "claude-sonnet-4-5"), ("openai", "gpt-4.1")]
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


def test_bad_references_are_rejected() -> None:
    with pytest.raises(ValueError):
        from gateway.settings import validate_references

        validate_references(Settings(providers=[{"name": "a", "dialect": "demo"}], routes=[{"model": "m", "provider": "b"}]))


def test_check_config_cli(tmp_path: Path) -> None:
    ok = subprocess.run([sys.executable, "-m", "gateway", "check-config", str(ROOT / "config" / "gateway.example.toml"), "--model", "claude-x"], capture_output=True, text=True)
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
