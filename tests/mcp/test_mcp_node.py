"""The official TypeScript MCP SDK (``@modelcontextprotocol/sdk``, installed by tests/node/setup.sh)
against the gateway's ``/mcp``: the handshake, the key's tools, structured and ``isError`` results,
a forbidden call. Skips when node (>= 18) or the package is missing."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.mcp.conftest import KEYS

NODE_DIR = Path(__file__).resolve().parents[1] / "node"


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    version = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
    match = re.match(r"v(\d+)\.", version)
    if not match or int(match.group(1)) < 18:
        pytest.skip(f"node {version or '?'} is too old (>= 18)")
    if not (NODE_DIR / "node_modules" / "@modelcontextprotocol" / "sdk" / "package.json").is_file():
        pytest.skip("tests/node/node_modules lacks @modelcontextprotocol/sdk: run tests/node/setup.sh")
    return node


def test_the_typescript_sdk_client(gateway: Any) -> None:
    node = _node()
    proc = subprocess.run(
        [node, str(NODE_DIR / "mcp.mjs"), gateway.url, KEYS["search"]],
        cwd=NODE_DIR,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["protocolVersion"] == "2025-11-25" and seen["server"] == "llm-gateway"
    assert seen["tools"] == [
        "calc_add", "calc_env", "calc_pid", "files_fail", "files_progress", "files_read_file", "files_slow"
    ]  # fmt: skip
    assert seen["add"]["structuredContent"] == {"result": 42} and not seen["add"].get("isError")
    assert seen["read"]["structuredContent"] == {"path": "node/text", "size": 9, "text": "contents of node/text"}
    assert seen["fail"]["isError"] is True and seen["fail"]["content"][0]["text"] == "Error executing tool fail"
    assert seen["forbidden"]["code"] == -32602 and "may not call" in seen["forbidden"]["message"]
