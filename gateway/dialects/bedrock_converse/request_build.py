"""``ChatRequest`` → a Bedrock Converse call: ``POST /model/{modelId}/converse-stream`` (or
``/converse`` for a whole reply).

The model id is ONE path segment, percent-encoded (``:`` of versioned ids, ``/`` of ARNs), as the
AWS SDKs send it; the host, SigV4 signing and the eventstream framing are the platform layer's
(gateway/platforms/). The body follows botocore's ``ConverseStreamRequest`` shape: ``messages`` and
``system`` (content.py), ``inferenceConfig`` {maxTokens, temperature, topP, stopSequences},
``toolConfig`` {tools: [{toolSpec}], toolChoice}, ``outputConfig.textFormat`` for a JSON schema,
and ``additionalModelRequestFields`` for what each model family names itself (models.py):

* reasoning: Claude ``{"thinking": {"type": "enabled", "budget_tokens": N}}`` (N ≥ 1024 and below
  maxTokens, which is then always sent), or, for the models that take (4.6) or only take (4.7,
  Claude 5) adaptive thinking, ``{"thinking": {"type": "adaptive"}, "output_config": {"effort": …}}``
  (the model lists of gateway/dialects/anthropic/models.py, which are facts about Claude, not about
  a wire, and the provider's ``adaptive_thinking_models`` override); Amazon Nova 2 ``{"reasoningConfig": {"type": "enabled",
  "maxReasoningEffort": low|medium|high}}``; OpenAI gpt-oss ``{"reasoning_effort": …}``. Other
  models (DeepSeek R1 reasons on its own, Llama, Mistral … do not) have no field: asked-for
  reasoning is left out and recorded in ``dropped``. Claude keeps Anthropic's rules: no thinking
  with forced tool use, nor when a tool-call turn of the current loop lacks a Converse-signed
  reasoning block (Claude would 400), and with thinking no temperature, no top_k, top_p ≥ 0.95;
  the Claude models that refuse temperature with top_p (``sampling_exclusive_models``) keep the
  temperature.
* ``top_k``: Claude ``{"top_k": k}``, Nova ``{"inferenceConfig": {"topK": k}}``; elsewhere recorded
  in ``dropped``.

Converse has no "no tools" choice: ``tool_choice: none`` sends no ``toolConfig`` at all, unless the
history holds tool blocks (Bedrock then requires a ``toolConfig``), in which case the tools go with
the default choice and ``tool_choice`` is recorded in ``dropped``. Tool blocks in the history
without any tool declared get a minimal declaration per called tool name, for the same reason.
Temperatures above Converse's 1.0 are clamped to 1.0.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import quote

import orjson

from gateway.dialects.anthropic import models as claude
from gateway.dialects.base import BuildOptions, UpstreamCall
from gateway.dialects.thinking import budget_for_effort, level_of
from gateway.ir import ChatRequest, Message, ThinkingPart, ToolCallPart, ToolResultPart

from .content import Folder, has_tool_blocks, history_tools
from .models import Family, family

MIN_BUDGET = 1024
_EFFORT3 = {"minimal": "low", "low": "low", "medium": "medium", "high": "high", "xhigh": "high"}
_CLAUDE_EFFORT = {"minimal": "low", "low": "low", "medium": "medium", "high": "high", "xhigh": "max"}
_EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}

log = logging.getLogger("gateway.dialects.bedrock_converse")


def model_path(model: str, stream: bool) -> str:
    return f"/model/{quote(model, safe='')}/{'converse-stream' if stream else 'converse'}"


def _loop_lacks_signed_reasoning(messages: list[Message]) -> bool:
    """True when an assistant turn of the current tool-use loop (after the last user turn that is
    not only tool results) calls tools without a Converse-signed reasoning part."""
    start = 0
    for i, message in enumerate(messages):
        if message.role == "user" and any(not isinstance(p, ToolResultPart) for p in message.content):
            start = i + 1
    for message in messages[start:]:
        if message.role != "assistant" or not any(isinstance(p, ToolCallPart) for p in message.content):
            continue
        if not any(isinstance(p, ThinkingPart) and Folder.reasoning(p) is not None for p in message.content):
            return True
    return False


def _claude_thinking(req: ChatRequest, max_tokens: int, adaptive: bool, dropped: list[str]) -> dict[str, Any] | None:
    t = req.thinking
    effort = level_of(t)
    if t is None or effort is None:
        return None
    refusal = claude.claude_thinking_refusal(req, lambda: _loop_lacks_signed_reasoning(req.messages), "Converse")
    if refusal is not None:
        log.warning("bedrock-converse: thinking dropped: %s", refusal)
        dropped.append("thinking")
        return None
    if adaptive:
        return {"type": "adaptive"}
    if max_tokens <= MIN_BUDGET:
        log.warning(
            "bedrock-converse: thinking dropped: maxTokens %d leaves no room for a %d-token budget",
            max_tokens,
            MIN_BUDGET,
        )
        dropped.append("thinking")
        return None
    budget = t.budget_tokens or budget_for_effort(effort)
    return {"type": "enabled", "budget_tokens": max(MIN_BUDGET, min(budget, max_tokens - 1))}


def _model_fields(
    req: ChatRequest, fam: Family, model: str, options: BuildOptions, max_tokens: int | None, dropped: list[str]
) -> tuple[dict[str, Any], bool]:
    """(``additionalModelRequestFields``, whether Claude thinking is on)."""
    fields: dict[str, Any] = {}
    thinking_on = False
    effort = level_of(req.thinking)
    if fam == "claude" and max_tokens is not None:
        adaptive = claude.matches(model, options.adaptive_thinking_models, claude.ADAPTIVE_THINKING)
        thinking = _claude_thinking(req, max_tokens, adaptive, dropped)
        if thinking is not None:
            fields["thinking"] = thinking
            thinking_on = True
            if adaptive and effort is not None:
                fields["output_config"] = {"effort": _CLAUDE_EFFORT.get(effort, "high")}
    elif effort is not None and fam == "nova2":
        fields["reasoningConfig"] = {"type": "enabled", "maxReasoningEffort": _EFFORT3.get(effort, "medium")}
    elif effort is not None and fam == "gpt-oss":
        fields["reasoning_effort"] = _EFFORT3.get(effort, "medium")
    elif effort is not None:
        log.warning("bedrock-converse: thinking dropped: no known reasoning field for this model")
        dropped.append("thinking")
    if req.top_k is not None:
        if fam == "claude" and thinking_on:
            dropped.append("top_k")
        elif fam == "claude":
            fields["top_k"] = req.top_k
        elif fam in ("nova", "nova2"):
            fields["inferenceConfig"] = {"topK": req.top_k}
        else:
            dropped.append("top_k")
    return fields, thinking_on


def _inference(
    req: ChatRequest, max_tokens: int | None, thinking_on: bool, exclusive: bool, dropped: list[str]
) -> dict[str, Any]:
    config: dict[str, Any] = {}
    if max_tokens is not None:
        config["maxTokens"] = max_tokens
    # Claude's rules (thinking_on is only ever set for Claude); top_k is not an inferenceConfig field
    temperature, top_p, _ = claude.claude_sampling(
        req.temperature, req.top_p, None, thinking_on=thinking_on, exclusive=exclusive, dropped=dropped
    )
    if temperature is not None:
        if temperature > 1.0:
            log.warning("bedrock-converse: temperature %g clamped to 1.0 (Converse's maximum)", temperature)
        config["temperature"] = min(max(temperature, 0.0), 1.0)
    if top_p is not None:
        config["topP"] = top_p
    stops = [s for s in req.stop if s]
    if stops:
        config["stopSequences"] = stops
    return config


def _tool_spec(name: str, description: str | None, schema: Any, strict: bool | None) -> dict[str, Any]:
    schema = schema if isinstance(schema, dict) else {}
    if "type" not in schema:
        schema = {"type": "object", **schema}
    spec: dict[str, Any] = {"name": name, "inputSchema": {"json": schema}}
    if description:
        spec["description"] = description
    if strict is not None:
        spec["strict"] = strict
    return {"toolSpec": spec}


def _tool_config(req: ChatRequest, messages: list[dict[str, Any]], dropped: list[str]) -> dict[str, Any] | None:
    choice = req.tool_choice
    in_history = has_tool_blocks(messages)
    tools = [_tool_spec(t.name, t.description, t.parameters, t.strict) for t in req.tools]
    declared = {t.name for t in req.tools}
    if in_history:  # Bedrock requires a toolConfig declaring the tools the history calls
        tools += [
            _tool_spec(name, None, _EMPTY_SCHEMA, None) for name in history_tools(messages) if name not in declared
        ]
    if not tools:
        return None
    if choice is not None and choice.mode == "none":
        if not in_history:
            return None
        dropped.append("tool_choice")
        return {"tools": tools}
    config: dict[str, Any] = {"tools": tools}
    if choice is not None and req.tools:
        if choice.mode == "required" and choice.allowed and len(choice.allowed) == 1:
            config["toolChoice"] = {"tool": {"name": choice.allowed[0]}}
        elif choice.mode == "required":
            config["toolChoice"] = {"any": {}}
        elif choice.mode == "tool" and choice.name:
            config["toolChoice"] = {"tool": {"name": choice.name}}
        else:
            config["toolChoice"] = {"auto": {}}
    return config


def _output_config(req: ChatRequest) -> dict[str, Any] | None:
    rf = req.response_format
    if rf is None or rf.get("type") != "json_schema" or not isinstance(rf.get("schema"), dict):
        return None
    definition: dict[str, Any] = {"schema": orjson.dumps(rf["schema"]).decode()}
    for key in ("name", "description"):
        value = rf.get(key)
        if isinstance(value, str) and value:
            definition[key] = value
    return {"textFormat": {"type": "json_schema", "structure": {"jsonSchema": definition}}}


def build_request(req: ChatRequest, upstream_model: str, options: BuildOptions) -> UpstreamCall:
    dropped: list[str] = []
    fam = family(upstream_model)
    folder = Folder(cache_points=fam in ("claude", "nova", "nova2"), dropped=dropped)
    system, messages = folder.fold(req)
    body: dict[str, Any] = {"messages": messages}
    if system:
        body["system"] = system
    # Claude needs a limit to fit a thinking budget under (and Bedrock's own default is small)
    max_tokens = req.max_tokens or (options.default_max_tokens if fam == "claude" else None)
    fields, thinking_on = _model_fields(req, fam, upstream_model, options, max_tokens, dropped)
    exclusive = fam == "claude" and claude.matches(
        upstream_model, options.sampling_exclusive_models, claude.SAMPLING_EXCLUSIVE
    )
    inference = _inference(req, max_tokens, thinking_on, exclusive, dropped)
    if inference:
        body["inferenceConfig"] = inference
    tool_config = _tool_config(req, messages, dropped)
    if tool_config is not None:
        body["toolConfig"] = tool_config
    output_config = _output_config(req)
    if output_config is not None:
        body["outputConfig"] = output_config
    if fields:
        body["additionalModelRequestFields"] = fields
    if fam == "claude" and req.stop:
        body["additionalModelResponseFieldPaths"] = ["/stop_sequence"]  # which stop sequence matched
    return UpstreamCall(model_path(upstream_model, options.stream), body, dropped=dropped)
