"""The official Node SDKs (openai, @anthropic-ai/sdk, @google/genai) against the gateway.

Runs ``tests/node/matrix.mjs`` with node against the session's gateway + fake upstream
(``tests/conftest.py``): every caller mode × upstream dialect × scenario, one line per cell.
Skips when node (>= 18) or ``tests/node/node_modules`` is missing: run ``tests/node/setup.sh`` first.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
SDKS = ("openai", "@anthropic-ai/sdk", "@google/genai")


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed (the Node SDK matrix needs node >= 18)")
    try:
        version = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"node does not run: {exc}")
    match = re.match(r"v(\d+)\.", version)
    if not match or int(match.group(1)) < 18:
        pytest.skip(f"node {version or '?'} is too old (the Node SDK matrix needs node >= 18)")
    missing = [name for name in SDKS if not (HERE / "node_modules" / name / "package.json").is_file()]
    if missing:
        pytest.skip(f"tests/node/node_modules lacks {', '.join(missing)}: run tests/node/setup.sh (npm install)")
    return node


def test_node_sdk_matrix(gateway: Any) -> None:
    node = _node()
    proc = subprocess.run(
        [node, str(HERE / "matrix.mjs"), gateway.url],
        cwd=HERE,
        capture_output=True,
        text=True,
        timeout=600,
    )
    lines = proc.stdout.splitlines()
    summary = next((line for line in reversed(lines) if re.fullmatch(r"\d+ passed, \d+ failed", line)), None)
    failures = [line for line in lines if line.startswith("FAIL ")]
    assert summary is not None, (
        f"matrix.mjs printed no summary (exit {proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    )
    passed = int(summary.split()[0])
    assert passed > 0, summary
    assert not failures and proc.returncode == 0, (
        f"{summary} (Node SDKs; node matrix.mjs {gateway.url}):\n" + "\n".join(failures)
    )


@pytest.mark.parametrize("upstream", ["anthropic", "openai-chat", "gemini"])
def test_node_interactions_stream_resumed_after_a_drop(gateway: Any, upstream: str) -> None:
    node = _node()
    proc = subprocess.run(
        [node, str(HERE / "interactions_resume.mjs"), gateway.url, f"{upstream}--text"],
        cwd=HERE,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.stdout.strip() == "OK Hello from the gateway. 你好 — ok!", proc.stdout[-2000:] + proc.stderr[-2000:]
