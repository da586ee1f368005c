"""The agent matrix's shared pieces: model names, prompts, work folders, the gateway config."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from gateway.server.app import create_app
from gateway.server.protocol import uvicorn_options
from gateway.settings import Settings
from tests.support.fake_upstream import ServerThread

DIALECTS = ["anthropic", "openai-chat", "openai-responses", "gemini"]
TASKS = ["plain", "tool", "thinking"]
NATIVE = {"claude": "anthropic", "codex": "openai-responses", "gemini": "gemini"}
FILE_NAME = "notes.txt"


def task_model(dialect: str, task: str, prefix: str = "") -> str:
    """The model name the CLI is given: the route picks the upstream, the suffix the fake's script.

    ``prefix`` puts a name the CLI knows in front (``claude-sonnet-4-5--``): Claude Code then sends
    ``thinking: {type: enabled, budget_tokens}`` and no ``system`` turns in ``messages``, instead of
    what it sends for names it does not know (adaptive thinking, ``system`` turns).
    """
    return f"{prefix}agent-{dialect}--{task}"


def work_folder(path: Path) -> Path:
    """A work folder (outside any git checkout) holding one file with a unique token."""
    path.mkdir(parents=True, exist_ok=True)
    (path / FILE_NAME).write_text(f"The magic word is {file_token(path)}.\n")
    return path


def file_token(path: Path) -> str:
    marker = path / ".token"
    if not marker.exists():
        marker.write_text(f"AGENT-TOKEN-{secrets.token_hex(4).upper()}")
    return marker.read_text()


def prompt_for(task: str, work: Path) -> str:
    if task == "plain":
        return "Say hello. Do not use any tools."
    return f"Read the file {work / FILE_NAME} with your file reading tool and reply with its exact content."


# The fake Anthropic plays a current Claude, which refuses temperature with top_p: every model it
# serves is listed as such. No provider sets drop_unsupported: the agents must work with the
# default config (Gemini CLI's topK toward Chat and Responses is dropped and reported by default).
PROVIDER_EXTRAS: dict[str, dict[str, Any]] = {
    "anthropic": {"sampling_exclusive_models": ["*"]},
}


def gateway_config(fake_url: str, state_dir: Path) -> dict[str, Any]:
    bases = {
        "anthropic": fake_url,
        "openai-chat": fake_url + "/v1",
        "openai-responses": fake_url + "/v1",
        "gemini": fake_url,
    }
    providers = [
        {
            "name": f"up-{d}",
            "dialect": d,
            "base_url": bases[d],
            "api_key": f"sk-upstream-{d}",
            "max_retries": 0,
            "first_byte_timeout": 30.0,
            "idle_timeout": 30.0,
            "connect_timeout": 5.0,
            **PROVIDER_EXTRAS.get(d, {}),
        }
        for d in DIALECTS
    ]
    routes = [{"model": f"*agent-{d}--*", "provider": f"up-{d}"} for d in DIALECTS]
    routes.append({"model": "*", "provider": "up-anthropic"})  # background calls (e.g. Claude Code's small model)
    return {
        "server": {"access_log": False},
        "auth": {"keys_env": ""},
        "providers": providers,
        "routes": routes,
        "store": {"url": f"sqlite:///{state_dir / 'gateway-state.db'}"},
    }


@contextmanager
def gateway_for(fake_url: str, state_dir: Path) -> Iterator[ServerThread]:
    settings = Settings(**gateway_config(fake_url, state_dir))
    with ServerThread(create_app(settings), **uvicorn_options()) as server:  # the gateway's own server layer
        yield server
