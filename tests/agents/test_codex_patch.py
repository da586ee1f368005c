"""Codex CLI edits a file with its freeform ``apply_patch`` tool through an Anthropic upstream.

Codex declares ``apply_patch`` as a Responses ``custom`` tool (a Lark grammar) for the model slugs
it knows to take one (``gpt-5.5``; the matrix's own model names get no such tool). The gateway
gives the Anthropic upstream a function ``apply_patch`` of one ``input`` string
(gateway/dialects/openai_responses/client_tools.py); the scripted model calls it with a patch, the
call reaches Codex as a ``custom_tool_call``, Codex applies the patch in its work folder and sends
the ``custom_tool_call_output`` back, which reaches the upstream as the tool result.

Run with ``make test-agents`` (RUN_AGENT_TESTS=1); skipped without node or the Codex CLI.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.agents import harness
from tests.agents.fake_agent_upstream import ScriptedUpstream
from tests.agents.matrix import work_folder
from tests.agents.test_agents import _MISSING, _SKIP, TIMEOUT, _trace, fake, gateway  # noqa: F401
from tests.support.fake_upstream import ServerThread

pytestmark = [
    pytest.mark.agents,
    pytest.mark.skipif(_SKIP is not None, reason=_SKIP or ""),
    pytest.mark.skipif("codex" in _MISSING, reason="the Codex CLI is not installed (make agents-setup)"),
]

MODEL = "gpt-5.5"  # routed to the Anthropic upstream by the matrix's catch-all route
MARK = "PATCHED-BY-CODEX"
PATCH = f"*** Begin Patch\\n*** Add File: made.txt\\n+{MARK}\\n*** End Patch\\n"  # JSON-escaped
PROMPT = 'call the tool apply_patch with {"input": "' + PATCH + '"}'


def test_codex_applies_a_patch_through_an_anthropic_upstream(
    fake: tuple[ScriptedUpstream, ServerThread],  # noqa: F811
    gateway: ServerThread,  # noqa: F811
    tmp_path: Path,
) -> None:
    upstream = fake[0]
    upstream.reset()
    work = work_folder(tmp_path / "work")
    run = harness.run_codex(gateway.url, MODEL, PROMPT, work, timeout=TIMEOUT, sandbox="workspace-write")
    seen = upstream.requests(MODEL)
    context = f"\n{run.describe()}\n{_trace(seen)}"
    assert seen and seen[0].path == "/v1/messages", context
    [offered] = [t for t in seen[0].body.get("tools", []) if t.get("name") == "apply_patch"]
    assert list(offered["input_schema"]["properties"]) == ["input"], context
    assert "grammar" in offered["input_schema"]["properties"]["input"]["description"], context
    assert [s.action for s in seen] == ["tool_call", "tool_answer"], context
    assert (work / "made.txt").read_text() == MARK + "\n", context
    assert "made.txt" in (seen[-1].tool_result or ""), context
    assert run.answer is not None and "made.txt" in run.answer, context
