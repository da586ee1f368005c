"""Claude Code with ``--mcp-config`` pointing at the gateway's ``/mcp``: in one headless turn the
(scripted) model calls an MCP tool the key may call, Claude Code runs it through the gateway, and
the tool's answer reaches the model and the final reply. The key's other tools are not offered.

Run with ``make test-agents`` (RUN_AGENT_TESTS=1); skipped without node or the Claude Code CLI.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gateway.server.app import create_app
from gateway.server.protocol import uvicorn_options
from gateway.settings import Settings
from tests.agents import harness
from tests.agents.fake_agent_upstream import TOOL_ANSWER_PREFIX, ScriptedUpstream
from tests.agents.matrix import gateway_config, task_model
from tests.agents.test_agents import _MISSING, _SKIP, TIMEOUT
from tests.mcp.conftest import quick_start, wait_ready
from tests.support.access_log import Capture, capture_access_log
from tests.support.fake_upstream import ServerThread

STDIO_SERVER = Path(__file__).resolve().parents[1] / "mcp" / "stdio_server.py"
pytestmark = [
    pytest.mark.agents,
    pytest.mark.skipif(_SKIP is not None, reason=_SKIP or ""),
    pytest.mark.skipif("claude" in _MISSING, reason="the Claude Code CLI is not installed (make agents-setup)"),
]


@pytest.fixture(scope="module")
def fake() -> Iterator[tuple[ScriptedUpstream, ServerThread]]:
    upstream = ScriptedUpstream()
    with ServerThread(upstream) as server:
        upstream.port = server.port
        yield upstream, server


@pytest.fixture(scope="module")
def access() -> Iterator[Capture]:
    with capture_access_log() as capture:
        yield capture


@pytest.fixture(scope="module")
def gateway(fake: Any, access: Capture, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    config = gateway_config(fake[1].url, tmp_path_factory.mktemp("gateway-state"))
    config["server"]["access_log"] = True
    config["mcp_servers"] = [{"name": "calc", "command": [sys.executable, str(STDIO_SERVER)]}]
    # the agent's key: every model (as the harness's other cells), and of the MCP tools only calc_add
    config["keys"] = [
        {"name": "agent", "key_sha256": hashlib.sha256(harness.KEY.encode()).hexdigest(), "mcp_tools": ["calc_add"]}
    ]
    mp = pytest.MonkeyPatch()
    quick_start(mp)
    with ServerThread(create_app(Settings(**config)), **uvicorn_options()) as server:
        wait_ready(server.url, ["calc"])
        yield server
    mp.undo()


def test_claude_code_calls_an_allowed_mcp_tool_through_the_gateway(
    fake: Any, gateway: ServerThread, access: Capture, tmp_path: Path
) -> None:
    upstream = fake[0]
    upstream.reset()
    mcp_config = tmp_path / "mcp.json"
    mcp_config.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "gw": {
                        "type": "http",
                        "url": f"{gateway.url}/mcp",
                        "headers": {"Authorization": f"Bearer {harness.KEY}"},
                    }
                }
            }
        )
    )
    work = tmp_path / "work"
    work.mkdir()
    run = harness.run_claude(
        gateway.url,
        task_model("anthropic", "tool"),
        'Call the tool calc_add with {"a": 19, "b": 23} and reply with what it returns.',
        work,
        TIMEOUT,
        extra_args=["--mcp-config", str(mcp_config), "--strict-mcp-config", "--allowedTools", "mcp__gw__calc_add"],
        # Claude Code otherwise defers MCP tools behind its ToolSearch tool: the scripted model
        # would have to search first; with it off the tool is in the request's tools at once
        extra_env={"ENABLE_TOOL_SEARCH": "false"},
    )
    seen = upstream.requests()
    offered = {name for s in seen for name in s.tool_names if name.startswith("mcp__")}
    assert offered == {"mcp__gw__calc_add"}, (offered, run.describe())  # the key's one tool, not calc_pid/env
    assert any(s.action == "tool_call" for s in seen), run.describe()
    assert run.answer is not None and run.answer.startswith(TOOL_ANSWER_PREFIX), run.describe()
    assert run.answer == TOOL_ANSWER_PREFIX + '{"result":42}', run.describe()  # the tool's structured answer
    line = access.line_where(lambda e: e.get("kind") == "mcp" and e.get("tool") == "calc_add", timeout=10)
    assert line["key"] == "agent" and line["status"] == 200 and line["server"] == "calc"
