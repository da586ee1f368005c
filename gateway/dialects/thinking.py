"""Reasoning effort ⇄ thinking budget, the one table every codec shares.

OpenAI speaks in efforts (``reasoning_effort`` / ``reasoning.effort``), Anthropic in
``budget_tokens``, Gemini in ``thinkingBudget`` (2.5) or ``thinkingLevel`` (3), Interactions in
``thinking_level``. Budgets are what the efforts are commonly mapped to by Anthropic's and Google's
own compatibility layers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gateway.ir import Thinking

EFFORT_BUDGETS: dict[str, int] = {
    "minimal": 1024,
    "low": 2048,
    "medium": 8192,
    "high": 24576,
    "xhigh": 32768,
}

EFFORTS = tuple(EFFORT_BUDGETS)


def budget_for_effort(effort: str) -> int:
    return EFFORT_BUDGETS.get(effort, EFFORT_BUDGETS["medium"])


def effort_for_budget(budget: int) -> str:
    """The smallest effort whose budget covers ``budget``."""
    for effort, tokens in EFFORT_BUDGETS.items():
        if budget <= tokens:
            return effort
    return "xhigh"


def level_of(thinking: Thinking | None) -> str | None:
    """The effort to ask of an upstream that speaks in efforts, or None when reasoning was not asked.

    The caller's effort, else its budget's, else ``medium`` (OpenAI's default) when it only said
    "on" (Anthropic adaptive without an effort, Gemini's dynamic budget -1).
    """
    if thinking is None or thinking.enabled is False or thinking.effort == "none":
        return None
    if thinking.effort:
        return thinking.effort
    if thinking.budget_tokens:
        return effort_for_budget(thinking.budget_tokens)
    return "medium" if thinking.enabled else None
