"""Each dialect's ``stop_reasons.py``: wire value → normalised reason (``map_stop_reason``) and
``End`` → wire value (``render_stop_reason``), table-driven."""

from __future__ import annotations

import importlib
from typing import Any

import pytest

from gateway.dialects.registry import MODULES
from gateway.events import End


def stops(dialect: str) -> Any:
    return importlib.import_module(f"{MODULES[dialect]}.stop_reasons")


MAP: list[tuple[str, str | None, dict[str, bool], str]] = [
    ("anthropic", "end_turn", {}, "stop"),
    ("anthropic", "stop_sequence", {}, "stop"),
    ("anthropic", "max_tokens", {}, "length"),
    ("anthropic", "model_context_window_exceeded", {}, "length"),
    ("anthropic", "tool_use", {}, "tool_use"),
    ("anthropic", "pause_turn", {}, "pause"),
    ("anthropic", "refusal", {}, "refusal"),
    ("anthropic", "brand_new", {}, "stop"),
    ("anthropic", None, {}, "stop"),
    ("openai-chat", "stop", {}, "stop"),
    ("openai-chat", "stop", {"refusal": True}, "refusal"),
    ("openai-chat", "length", {"refusal": True}, "length"),
    ("openai-chat", "tool_calls", {}, "tool_use"),
    ("openai-chat", "function_call", {}, "tool_use"),
    ("openai-chat", "content_filter", {}, "content_filter"),
    ("openai-chat", "weird", {}, "stop"),
    ("openai-chat", None, {}, "stop"),
    ("openai-responses", "completed", {}, "stop"),
    ("openai-responses", "completed", {"tool_called": True}, "tool_use"),
    ("openai-responses", "max_output_tokens", {"tool_called": True}, "length"),
    ("openai-responses", "content_filter", {}, "content_filter"),
    ("openai-responses", "brand_new", {}, "length"),
    ("openai-responses", None, {}, "length"),
    ("gemini", "STOP", {}, "stop"),
    ("gemini", "STOP", {"tool_called": True}, "tool_use"),
    ("gemini", "MAX_TOKENS", {"tool_called": True}, "length"),
    ("gemini", "SAFETY", {}, "content_filter"),
    ("gemini", "RECITATION", {}, "content_filter"),
    ("gemini", "MALFORMED_FUNCTION_CALL", {}, "error"),
    ("gemini", "SOMETHING_NEW", {}, "stop"),
    ("gemini", None, {}, "stop"),
    ("gemini-interactions", "completed", {}, "stop"),
    ("gemini-interactions", "completed", {"tool_called": True}, "tool_use"),
    ("gemini-interactions", "requires_action", {}, "tool_use"),
    ("gemini-interactions", "incomplete", {}, "length"),
    ("gemini-interactions", "budget_exceeded", {}, "length"),
    ("gemini-interactions", "requires_continuation", {}, "pause"),
    ("gemini-interactions", "brand_new", {}, "stop"),
    ("bedrock-converse", "end_turn", {}, "stop"),
    ("bedrock-converse", "tool_use", {}, "tool_use"),
    ("bedrock-converse", "guardrail_intervened", {}, "content_filter"),
    ("bedrock-converse", "malformed_tool_use", {}, "error"),
    ("bedrock-converse", None, {}, "stop"),
]


@pytest.mark.parametrize("dialect,raw,hints,want", MAP, ids=[f"{d}-{r}-{'-'.join(h)}" for d, r, h, _ in MAP])
def test_map_stop_reason(dialect: str, raw: str | None, hints: dict[str, bool], want: str) -> None:
    assert stops(dialect).map_stop_reason(raw, **hints) == want


RENDER: list[tuple[str, End, bool, Any]] = [
    ("anthropic", End("stop"), False, "end_turn"),
    ("anthropic", End("stop", "end_turn", "###"), False, "stop_sequence"),
    ("anthropic", End("length"), False, "max_tokens"),
    ("anthropic", End("content_filter"), False, "refusal"),
    ("anthropic", End("pause"), False, "pause_turn"),
    ("anthropic", End("stop", "brand_new"), True, "brand_new"),
    ("anthropic", End("stop", "brand_new"), False, "end_turn"),
    ("openai-chat", End("tool_use"), False, "tool_calls"),
    # another dialect's refusal is never a clean, empty success (issue 30 item 5)
    ("openai-chat", End("refusal", "refusal"), False, "content_filter"),
    ("openai-responses", End("refusal", "refusal"), False, ("incomplete", "content_filter")),
    ("gemini-interactions", End("refusal", "refusal"), False, "incomplete"),
    ("anthropic", End("refusal", "refusal"), False, "refusal"),
    ("openai-chat", End("tool_use", "function_call"), True, "function_call"),
    ("openai-chat", End("stop", "made_up"), True, "stop"),
    ("openai-responses", End("stop"), False, ("completed", None)),
    ("openai-responses", End("tool_use"), False, ("completed", None)),
    ("openai-responses", End("length"), False, ("incomplete", "max_output_tokens")),
    ("openai-responses", End("length", "brand_new"), True, ("incomplete", "brand_new")),
    ("openai-responses", End("content_filter"), False, ("incomplete", "content_filter")),
    ("gemini", End("tool_use"), False, "STOP"),
    ("gemini", End("length"), False, "MAX_TOKENS"),
    ("gemini", End("refusal"), False, "SAFETY"),
    ("gemini", End("error", "MALFORMED_FUNCTION_CALL"), True, "MALFORMED_FUNCTION_CALL"),
    ("gemini", End("error", "MALFORMED_FUNCTION_CALL"), False, "OTHER"),
    ("gemini-interactions", End("tool_use"), False, "requires_action"),
    ("gemini-interactions", End("length"), False, "incomplete"),
    ("gemini-interactions", End("stop", "budget_exceeded"), True, "budget_exceeded"),
    ("gemini-interactions", End("stop", "in_progress"), True, "completed"),
    ("gemini-interactions", End("error"), False, "failed"),
]


@pytest.mark.parametrize(
    "dialect,end,same,want", RENDER, ids=[f"{d}-{e.reason}-{e.raw_reason}-{s}" for d, e, s, _ in RENDER]
)
def test_render_stop_reason(dialect: str, end: End, same: bool, want: Any) -> None:
    assert stops(dialect).render_stop_reason(end, same) == want


@pytest.mark.parametrize("dialect", [d for d in MODULES if hasattr(stops(d), "render_stop_reason")])
def test_every_reason_has_a_rendering(dialect: str) -> None:
    for reason in ("stop", "length", "tool_use", "content_filter", "refusal", "pause", "error"):
        assert stops(dialect).render_stop_reason(End(reason), False)  # type: ignore[arg-type]
