"""Coding agents through the gateway: each CLI, headless, against a scripted upstream of each dialect.

    CLI (claude -p | codex exec | gemini -p) -> gateway (real uvicorn, loopback) -> scripted fake
    upstream (real uvicorn, loopback) in anthropic | openai-chat | openai-responses | gemini

For every CLI x upstream dialect: a plain answer; a tool round trip (the fake calls the agent's own
file-reading tool, the agent runs it and sends the result back, the fake quotes it); and the same
with thinking, whose signature must come back on the follow-up (the fake answers the real API's
400 when it does not). Retries are off everywhere and Claude Code's non-streaming fallback is off,
so a broken stream fails the test instead of being papered over.

Run with ``make test-agents`` (sets RUN_AGENT_TESTS=1; ``make agents-setup`` installs the CLIs into
``.agents/``). The default ``make test`` run skips this module.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from gateway.server.app import create_app
from gateway.server.protocol import uvicorn_options
from gateway.settings import Settings
from tests.agents import harness
from tests.agents.fake_agent_upstream import (
    ANTHROPIC_SIGNATURE,
    GEMINI_SIGNATURE,
    PLAIN_ANSWER,
    RESPONSES_ENCRYPTED,
    TOOL_ANSWER_PREFIX,
    ScriptedUpstream,
    Seen,
)
from tests.agents.matrix import DIALECTS, TASKS, file_token, gateway_for, prompt_for, task_model, work_folder
from tests.agents.matrix import gateway_config as matrix_config
from tests.support.access_log import Capture, capture_access_log
from tests.support.fake_upstream import ServerThread


def _why_skip() -> str | None:
    """Why this machine cannot run the agent tests (None: it can)."""
    if os.environ.get("RUN_AGENT_TESTS") != "1":
        return "coding-agent CLI tests run only with `make test-agents` (RUN_AGENT_TESTS=1)"
    why = harness.node_ok()
    if why:
        return f"{why}: skipping the coding-agent CLI tests"
    if len(harness.missing_clis()) == len(harness.CLIS):
        return f"no agent CLI installed in {harness.BIN}: run `make agents-setup`"
    return None


# Skipped per test rather than per module, so a run that skips them all still exits 0 (not 5).
_SKIP = _why_skip()
_MISSING = harness.missing_clis()
pytestmark = [pytest.mark.agents, pytest.mark.skipif(_SKIP is not None, reason=_SKIP or "")]

TIMEOUT = float(os.environ.get("AGENT_TEST_TIMEOUT", "90"))
SIGNATURES = {"anthropic": ANTHROPIC_SIGNATURE, "openai-responses": RESPONSES_ENCRYPTED, "gemini": GEMINI_SIGNATURE}


@pytest.fixture(scope="module")
def fake() -> Iterator[tuple[ScriptedUpstream, ServerThread]]:
    upstream = ScriptedUpstream()
    with ServerThread(upstream) as server:
        upstream.port = server.port
        yield upstream, server


@pytest.fixture(scope="module")
def gateway(
    fake: tuple[ScriptedUpstream, ServerThread], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerThread]:
    with gateway_for(fake[1].url, tmp_path_factory.mktemp("gateway-state")) as server:
        yield server


def _trace(seen: list[Seen]) -> str:
    """What the upstream received, one line per request (repeats folded: Claude Code re-sends a 400)."""
    lines: list[str] = []
    for s in seen:
        line = (
            f"  {s.path}?{s.query} model={s.model} stream={s.stream} -> {s.status} {s.action}"
            + (f" error={s.error!r}" if s.error else "")
            + (f" tool_result={s.tool_result[:120]!r}" if s.tool_result else "")
        )
        if lines and lines[-1].split("  [x")[0] == line:
            count = int(lines[-1].rsplit("[x", 1)[1][:-1]) + 1 if "  [x" in lines[-1] else 2
            lines[-1] = f"{line}  [x{count}]"
        else:
            lines.append(line)
    return "upstream requests:\n" + ("\n".join(lines) or "  (none)")


@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("cli", list(harness.CLIS))
def test_agent_through_gateway(
    cli: str,
    dialect: str,
    task: str,
    fake: tuple[ScriptedUpstream, ServerThread],
    gateway: ServerThread,
    tmp_path: Path,
) -> None:
    check_cell(cli, dialect, task, "", fake[0], gateway, tmp_path)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_claude_known_model_thinking(
    dialect: str, fake: tuple[ScriptedUpstream, ServerThread], gateway: ServerThread, tmp_path: Path
) -> None:
    """Claude Code with a model name it knows: ``thinking: {type: enabled, budget_tokens: 31999}``."""
    check_cell("claude", dialect, "thinking", "claude-sonnet-4-5--", fake[0], gateway, tmp_path)


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("cli", list(harness.CLIS))
def test_cut_stream_fails_the_turn(
    cli: str, dialect: str, fake: tuple[ScriptedUpstream, ServerThread], gateway: ServerThread, tmp_path: Path
) -> None:
    """The upstream's stream ends cleanly but without its terminator: the agent must not finish."""
    if cli in _MISSING:
        pytest.skip(f"{cli} is not installed in {harness.BIN}: run `make agents-setup`")
    upstream = fake[0]
    upstream.reset()
    model = task_model(dialect, "cut")
    work = work_folder(tmp_path / "work")
    run = harness.RUNNERS[cli](gateway.url, model, prompt_for("plain", work), work, timeout=TIMEOUT)
    seen = upstream.requests(model)
    context = f"\n{run.describe()}\n{_trace(seen)}"
    assert seen and all(s.action.endswith("+cut") for s in seen), (
        "the upstream did not get to answer with the cut stream" + context
    )
    assert not run.timed_out, "the agent hung on a cut stream" + context
    assert run.answer is None, f"{cli} took a cut-off stream for a finished answer" + context
    if cli != "gemini":  # Gemini CLI 0.61 exits 0 and reports the failure as an "error" object in its JSON
        assert run.returncode != 0, f"{cli} exited 0 on a cut-off stream" + context


@pytest.fixture(scope="module")
def logged_gateways(
    fake: tuple[ScriptedUpstream, ServerThread], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ServerThread, ServerThread, Capture]]:
    """Two gateways with the access log on: WebSockets served (the default), and turned off."""
    with capture_access_log() as log:
        config = matrix_config(fake[1].url, tmp_path_factory.mktemp("ws-state"))
        config["server"]["access_log"] = True
        off = {**config, "websocket": {"enabled": False}}
        with (
            ServerThread(create_app(Settings(**config)), **uvicorn_options()) as on_server,
            ServerThread(create_app(Settings(**off)), **uvicorn_options()) as off_server,
        ):
            yield on_server, off_server, log


def _transports(log: Capture, model: str, since: int) -> list[tuple[str, str | None]]:
    """(transport, provider) of each access-log line for ``model`` written after line ``since``."""
    lines = [orjson.loads(text) for text in list(log.lines)[since:]]
    return [(line["transport"], line["provider"]) for line in lines if line.get("model") == model]


@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("dialect", DIALECTS)
def test_codex_over_websocket(
    dialect: str,
    task: str,
    fake: tuple[ScriptedUpstream, ServerThread],
    logged_gateways: tuple[ServerThread, ServerThread, Capture],
    tmp_path: Path,
) -> None:
    """Codex with WebSockets on (its provider's ``supports_websockets``) runs every turn over the
    gateway's socket, on every upstream dialect: the tool round trip chains on the connection's
    kept turns (Codex sends ``store: false`` and only the new items), thinking signatures included."""
    server, _, log = logged_gateways
    since = len(log.lines)
    check_cell("codex", dialect, task, "", fake[0], server, tmp_path, websockets=True)
    seen = _transports(log, task_model(dialect, task), since)
    assert seen and all(transport == "websocket" for transport, _ in seen), f"turns not over the socket: {seen}"
    assert any(provider is not None for _, provider in seen), f"no turn reached the upstream: {seen}"


def test_codex_falls_back_to_http_at_once_with_websockets_off(
    fake: tuple[ScriptedUpstream, ServerThread],
    logged_gateways: tuple[ServerThread, ServerThread, Capture],
    tmp_path: Path,
) -> None:
    """``[websocket] enabled = false``: Codex's ``GET /v1/responses`` (Upgrade: websocket) is a 426
    and it falls back to the HTTP stream at once (issue 18). Measured: the POST ~0.1 s later."""
    if "codex" in _MISSING:
        pytest.skip(f"codex is not installed in {harness.BIN}: run `make agents-setup`")
    _, server, log = logged_gateways
    upstream = fake[0]
    upstream.reset()
    model = task_model("openai-responses", "plain")
    work = work_folder(tmp_path / "work")
    since = len(log.lines)
    started = time.monotonic()
    run = harness.run_codex(server.url, model, prompt_for("plain", work), work, timeout=TIMEOUT, websockets=True)
    elapsed = time.monotonic() - started
    context = f"\n{run.describe()}\n{_trace(upstream.requests(model))}"
    assert run.answer is not None and PLAIN_ANSWER in run.answer, context
    assert "Responses WebSocket" in run.stderr, "codex did not try a WebSocket first" + context
    assert elapsed < 10, f"the fallback took {elapsed:.1f}s" + context
    assert {transport for transport, _ in _transports(log, model, since)} == {"http"}


def check_cell(
    cli: str,
    dialect: str,
    task: str,
    prefix: str,
    upstream: ScriptedUpstream,
    gateway: ServerThread,
    tmp_path: Path,
    **options: bool,
) -> None:
    if cli in _MISSING:
        pytest.skip(f"{cli} is not installed in {harness.BIN}: run `make agents-setup`")
    upstream.reset()
    model = task_model(dialect, task, prefix)
    work = work_folder(tmp_path / "work")
    run = harness.RUNNERS[cli](gateway.url, model, prompt_for(task, work), work, timeout=TIMEOUT, **options)
    seen = upstream.requests(model)
    context = f"\n{run.describe()}\n{_trace(seen)}"

    assert seen, f"the upstream never saw a request for {model}" + context
    assert all(s.stream for s in seen), "the gateway called the upstream without streaming" + context
    assert run.answer is not None, f"{cli} did not finish the turn" + context

    if task == "plain":
        assert PLAIN_ANSWER in run.answer, context
        return

    token = file_token(work)
    calls = [s for s in seen if s.action == "tool_call"]
    answers = [s for s in seen if s.action == "tool_answer"]
    assert calls, "the fake never got a request that offered a file-reading tool" + context
    assert answers and token in (answers[-1].tool_result or ""), (
        f"the tool result with {token} never reached the upstream" + context
    )
    assert TOOL_ANSWER_PREFIX.strip() in run.answer and token in run.answer, context
    if task == "thinking" and dialect in SIGNATURES:
        assert answers[-1].signature_back == SIGNATURES[dialect], (
            "the thinking signature did not come back on the follow-up" + context
        )
