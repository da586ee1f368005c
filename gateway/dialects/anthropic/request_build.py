"""``ChatRequest`` → an Anthropic ``POST /v1/messages`` call (always ``stream: true``).

What Anthropic insists on, and how the builder satisfies it for requests from any dialect:

* ``max_tokens`` is required: the caller's value or ``options.default_max_tokens``.
* Only a top-level ``system``: ``req.system`` plus every ``role: "system"`` turn, in order.
* Strict user/assistant alternation: consecutive same-role turns are merged; in a user turn the
  ``tool_result`` blocks come FIRST (Anthropic 400s otherwise); empty text blocks are dropped.
* Thinking: models in ``adaptive_thinking_models`` (``models.py``; Claude 4.6 and later) get
  ``{type: adaptive}`` with the effort in ``output_config.effort``; older ones ``{type: enabled}``
  where ``budget_tokens`` must be ≥ 1024 and < ``max_tokens`` (clamped; dropped when
  ``max_tokens`` ≤ 1024). An effort becomes a budget and back via ``gateway.dialects.thinking``. Thinking parts are
  sent only when made by Anthropic (``origin == "anthropic"``) and signed (or redacted).
  With thinking on, the assistant turns of the current tool-use loop (after the last user turn
  that is not only tool results) must begin with a signed thinking block; when one that calls
  tools has none (history from another provider), thinking is dropped for this request and logged,
  because Anthropic would answer 400 "Expected thinking or redacted_thinking". Forced tool use
  (``any``/``tool``) is incompatible with thinking too, and wins.
* A JSON-schema ``response_format`` becomes ``output_config.format`` (``schema.py`` brings the
  schema into Anthropic's subset).
* Sampling: with thinking on, temperature/top_k (and top_p < 0.95) from another dialect are left
  out; for models in ``sampling_exclusive_models`` top_p is left out when temperature is set.
  Every setting left out here is named in ``UpstreamCall.dropped`` (``gateway/dialects/carry.py``), and so is
  thinking when it has to be switched off.
* ``anthropic-beta`` is forwarded only from Anthropic callers, minus ``options.dropped_betas``.
* ``extras["anthropic"]`` passes through (``tools``/``thinking`` there replace the built ones).
"""

from __future__ import annotations

import logging
from typing import Any

from gateway.dialects.base import BuildOptions, UpstreamCall
from gateway.dialects.common import arguments_object
from gateway.dialects.thinking import budget_for_effort, effort_for_budget
from gateway.ir import (
    ChatRequest,
    FilePart,
    ImagePart,
    Message,
    OpaquePart,
    Part,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)

from . import models
from .auto_cache import place_breakpoints
from .schema import for_anthropic

DIALECT = "anthropic"
MIN_BUDGET = 1024

log = logging.getLogger("gateway.dialects.anthropic")


def _text(part: TextPart) -> dict[str, Any] | None:
    if not part.text:
        return None
    block: dict[str, Any] = {"type": "text", "text": part.text}
    if part.cache_control is not None:
        block["cache_control"] = part.cache_control
    return block


def _data_url(url: str) -> tuple[str, str] | None:
    """``data:<media>;base64,<data>`` → (media_type, data)."""
    head, sep, data = url.partition(",")
    if not sep or not head.startswith("data:") or not head.endswith(";base64"):
        return None
    return head[5:-7] or "application/octet-stream", data


def _source(media_type: str | None, data: str | None, url: str | None, default_type: str) -> dict[str, Any]:
    if data is not None:
        return {"type": "base64", "media_type": media_type or default_type, "data": data}
    url = url or ""
    if url.startswith("data:"):
        parsed = _data_url(url)
        if parsed is not None:
            return {"type": "base64", "media_type": parsed[0], "data": parsed[1]}
    if url.startswith(("http://", "https://")):
        return {"type": "url", "url": url}
    return {"type": "file", "file_id": url}


def _image(part: ImagePart) -> dict[str, Any]:
    return {"type": "image", "source": _source(part.media_type, part.data, part.url, "image/png")}


def _document(part: FilePart) -> dict[str, Any]:
    block: dict[str, Any] = {
        "type": "document",
        "source": _source(part.media_type, part.data, part.url, "application/pdf"),
    }
    if part.filename:
        block["title"] = part.filename
    return block


def _tool_result(part: ToolResultPart) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": part.tool_call_id}
    content: list[dict[str, Any]] = []
    for item in part.content:
        if isinstance(item, TextPart):
            text = _text(item)
            if text is not None:
                content.append(text)
        elif isinstance(item, ImagePart):
            content.append(_image(item))
        elif isinstance(item, FilePart):
            content.append(_document(item))
    if len(content) == 1 and content[0]["type"] == "text" and "cache_control" not in content[0]:
        block["content"] = content[0]["text"]
    elif content:
        block["content"] = content
    if part.is_error:
        block["is_error"] = True
    return block


def _thinking_block(part: ThinkingPart) -> dict[str, Any] | None:
    if part.origin != DIALECT:
        return None  # another provider's thought: Anthropic cannot verify it
    if part.redacted_data is not None:
        return {"type": "redacted_thinking", "data": part.redacted_data}
    if part.signature:
        return {"type": "thinking", "thinking": part.text, "signature": part.signature}
    return None


def _block(part: Part, role: str) -> dict[str, Any] | None:
    if isinstance(part, TextPart):
        return _text(part)
    if isinstance(part, ToolCallPart):
        return {"type": "tool_use", "id": part.id, "name": part.name, "input": arguments_object(part.arguments)}
    if isinstance(part, ToolResultPart):
        return _tool_result(part)
    if isinstance(part, ImagePart):
        return _image(part)
    if isinstance(part, FilePart):
        return _document(part)
    if isinstance(part, ThinkingPart):
        return _thinking_block(part) if role == "assistant" else None
    if isinstance(part, OpaquePart) and part.origin == DIALECT:  # a server tool's block, sent back verbatim
        return part.item
    return None


def fold_messages(req: ChatRequest) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(system blocks, alternating messages)."""
    system = [b for b in (_text(p) for p in req.system) if b is not None]
    turns: list[tuple[str, list[dict[str, Any]], list[dict[str, Any]]]] = []  # role, results, others
    for message in req.messages:
        if message.role == "system":
            system.extend(b for b in (_text(p) for p in message.content if isinstance(p, TextPart)) if b is not None)
            continue
        results: list[dict[str, Any]] = []
        others: list[dict[str, Any]] = []
        for part in message.content:
            block = _block(part, message.role)
            if block is None:
                continue
            (results if block["type"] == "tool_result" else others).append(block)
        if not results and not others:
            continue
        if turns and turns[-1][0] == message.role:
            turns[-1][1].extend(results)
            turns[-1][2].extend(others)
        else:
            turns.append((message.role, results, others))
    messages = [{"role": role, "content": results + others} for role, results, others in turns]
    return system, messages


def _loop_lacks_signed_thinking(messages: list[Message]) -> bool:
    """True when an assistant turn of the current tool-use loop calls tools without a signed
    Anthropic thinking part (see the module docstring)."""
    start = 0
    for i, message in enumerate(messages):
        if message.role == "user" and any(not isinstance(p, ToolResultPart) for p in message.content):
            start = i + 1
    for message in messages[start:]:
        if message.role != "assistant" or not any(isinstance(p, ToolCallPart) for p in message.content):
            continue
        if not any(isinstance(p, ThinkingPart) and _thinking_block(p) is not None for p in message.content):
            return True
    return False


def _thinking(
    req: ChatRequest, max_tokens: int, extras: dict[str, Any], adaptive: bool, dropped: list[str]
) -> dict[str, Any] | None:
    raw = extras.pop("thinking", None)
    t = req.thinking
    if t is None:
        return None
    if req.dialect == DIALECT and t.enabled is None:
        return None  # an Anthropic caller sent only output_config.effort: passed through as is
    if t.enabled is False:
        return {"type": "disabled"}
    if t.enabled is None and not t.budget_tokens and t.effort in (None, "none"):
        return None
    refusal = models.claude_thinking_refusal(req, lambda: _loop_lacks_signed_thinking(req.messages), "Anthropic")
    if refusal is not None:
        log.warning("anthropic: thinking dropped: %s", refusal)
        dropped.append("thinking")
        return None
    if isinstance(raw, dict) and raw.get("type") == "adaptive":
        return raw
    if (
        adaptive and req.dialect != DIALECT
    ):  # the model takes (or prefers) adaptive thinking; the effort goes in output_config
        out: dict[str, Any] = {"type": "adaptive"}
    else:
        budget = t.budget_tokens or budget_for_effort(t.effort or "medium")
        if max_tokens <= MIN_BUDGET:
            log.warning(
                "anthropic: thinking dropped: max_tokens %d leaves no room for a %d-token budget",
                max_tokens,
                MIN_BUDGET,
            )
            dropped.append("thinking")
            return None
        out = {"type": "enabled", "budget_tokens": max(MIN_BUDGET, min(budget, max_tokens - 1))}
    if isinstance(raw, dict) and "display" in raw:
        out["display"] = raw["display"]
    return out


# IR efforts → Anthropic's output_config.effort (low | medium | high | max)
_EFFORT = {"minimal": "low", "low": "low", "medium": "medium", "high": "high", "xhigh": "max"}


def _output_config(req: ChatRequest, extras: dict[str, Any], thinking: dict[str, Any] | None) -> dict[str, Any] | None:
    """``output_config``: an Anthropic caller's own (passed through), plus the JSON schema of a
    structured-output request and the effort of adaptive thinking asked by another dialect."""
    raw = extras.pop("output_config", None)
    out: dict[str, Any] = dict(raw) if isinstance(raw, dict) else {}
    rf = req.response_format
    if (
        rf is not None
        and rf.get("type") == "json_schema"
        and isinstance(rf.get("schema"), dict)
        and "format" not in out
    ):
        out["format"] = {"type": "json_schema", "schema": for_anthropic(rf["schema"])}
    t = req.thinking
    if thinking is not None and thinking.get("type") == "adaptive" and t is not None and "effort" not in out:
        effort = t.effort or (effort_for_budget(t.budget_tokens) if t.budget_tokens else None)
        if effort in _EFFORT:
            out["effort"] = _EFFORT[effort]
    return out or None


def _sampling(req: ChatRequest, body: dict[str, Any], thinking_on: bool, exclusive: bool, dropped: list[str]) -> None:
    """temperature / top_p / top_k, minus what the upstream refuses (each drop recorded).

    With thinking Anthropic takes neither temperature nor top_k, and top_p only from 0.95; an
    Anthropic caller gets exactly what it sent (and Anthropic's own answer). Models listed in
    ``sampling_exclusive_models`` refuse temperature with top_p: temperature is kept.
    """
    same = req.dialect == DIALECT
    temperature, top_p, top_k = models.claude_sampling(
        req.temperature,
        req.top_p,
        req.top_k,
        thinking_on=thinking_on and not same,
        exclusive=exclusive,
        dropped=dropped,
    )
    if temperature is not None:
        body["temperature"] = temperature
    if top_p is not None:
        body["top_p"] = top_p
    if top_k is not None:
        body["top_k"] = top_k


def _tools(req: ChatRequest) -> list[dict[str, Any]]:
    tools = []
    for tool in req.tools:
        schema = tool.parameters if isinstance(tool.parameters, dict) else {}
        if "type" not in schema:
            schema = {"type": "object", **schema}
        entry: dict[str, Any] = {"name": tool.name}
        if tool.description:
            entry["description"] = tool.description
        entry["input_schema"] = schema
        if tool.strict is not None:  # strict tool use (structured outputs)
            entry["strict"] = tool.strict
        tools.append(entry)
    return tools


def _tool_choice(req: ChatRequest) -> dict[str, Any] | None:
    choice = req.tool_choice
    out: dict[str, Any] | None = None
    if choice is not None:
        if choice.mode == "required" and choice.allowed and len(choice.allowed) == 1:
            out = {"type": "tool", "name": choice.allowed[0]}  # "one of [x]" is "x"
        elif choice.mode == "required":
            out = {"type": "any"}
        elif choice.mode == "tool" and choice.name:
            out = {"type": "tool", "name": choice.name}
        elif choice.mode == "none":
            out = {"type": "none"}
        else:
            out = {"type": "auto"}
    if req.parallel_tool_calls is False:
        out = out or {"type": "auto"}
        if out["type"] != "none":
            out["disable_parallel_tool_use"] = True
    return out


def _beta_header(req: ChatRequest, options: BuildOptions) -> str | None:
    if req.dialect != DIALECT:
        return None
    value = req.headers.get("anthropic-beta")
    if not value:
        return None
    dropped = set(options.dropped_betas)
    kept = [b.strip() for b in value.split(",") if b.strip() and b.strip() not in dropped]
    return ",".join(kept) or None


def build_request(req: ChatRequest, upstream_model: str, options: BuildOptions) -> UpstreamCall:
    same = req.dialect == DIALECT
    extras = dict(req.extras.get(DIALECT) or {})
    dropped: list[str] = []
    system, messages = fold_messages(req)
    max_tokens = req.max_tokens or options.default_max_tokens
    body: dict[str, Any] = {"model": upstream_model, "max_tokens": max_tokens, "messages": messages}
    if system:
        body["system"] = system
    original_tools = extras.pop("tools", None)
    tools = original_tools if isinstance(original_tools, list) else _tools(req)
    if tools:
        body["tools"] = tools
        choice = _tool_choice(req)
        if choice is not None:
            body["tool_choice"] = choice
    adaptive = models.matches(upstream_model, options.adaptive_thinking_models, models.ADAPTIVE_THINKING)
    thinking = _thinking(req, max_tokens, extras, adaptive, dropped)
    thinking_on = thinking is not None and thinking.get("type") != "disabled"
    if thinking is not None:
        body["thinking"] = thinking
    output_config = _output_config(req, extras, thinking)
    if output_config is not None:
        body["output_config"] = output_config
    if req.stop:
        body["stop_sequences"] = req.stop
    exclusive = models.matches(upstream_model, options.sampling_exclusive_models, models.SAMPLING_EXCLUSIVE)
    _sampling(req, body, thinking_on, exclusive, dropped)
    if same and req.metadata:
        body["metadata"] = req.metadata
    elif req.user:
        body["metadata"] = {"user_id": req.user}
    body.update(extras)
    if options.auto_cache:
        place_breakpoints(body, upstream_model)
    body["stream"] = options.stream
    headers: dict[str, str] = {}
    beta = _beta_header(req, options)
    if beta:
        headers["anthropic-beta"] = beta
    return UpstreamCall("/v1/messages", body, headers=headers, dropped=dropped)
