"""The official SDKs as callers: one driver per caller dialect, each returning an ``Outcome``.

A driver sends one scenario's request through the gateway with the real SDK (streaming or whole)
and reads the answer the way an application would (the SDK's own stream helpers / response
objects). Errors propagate as the SDK raises them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import anthropic
import openai
from google import genai
from google.genai import types as gtypes

SYSTEM = "You are a test assistant."
USER = "What's the weather in Paris?"
WEATHER = {
    "name": "get_weather",
    "description": "Current weather for a city",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city"],
        "additionalProperties": False,
    },
}
TIME = {
    "name": "get_time",
    "description": "Current time in a timezone",
    "parameters": {"type": "object", "properties": {"timezone": {"type": "string"}}, "required": ["timezone"]},
}
TOOL_RESULT = '{"temp_c": 18, "sky": "sunny"}'
MAX_TOKENS = {"max_tokens": 16}


def parse_args(text: str | None) -> dict[str, Any]:
    """Tool arguments as an application would read them; a cut-off JSON (max_tokens mid-call) is kept raw."""
    try:
        value = json.loads(text or "{}")
    except json.JSONDecodeError:
        return {"_raw": text}
    return value if isinstance(value, dict) else {"_raw": text}


@dataclass
class Outcome:
    text: str = ""
    thinking: str = ""
    tools: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    tool_ids: list[str] = field(default_factory=list)
    stop: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    model: str | None = None
    signatures: list[str] = field(default_factory=list)


def tools_for(scenario: str) -> list[dict[str, Any]]:
    if scenario == "parallel_tool_calls":
        return [WEATHER, TIME]
    if scenario in ("tool_call", "tool_result_turn"):
        return [WEATHER]
    return []


def max_tokens_for(scenario: str) -> int:
    return 16 if scenario == "max_tokens" else 4096


# --------------------------------------------------------------------------- anthropic


def anthropic_client(base_url: str, key: str = "sk-caller") -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=base_url, api_key=key, max_retries=0, timeout=20)


def anthropic_call(base_url: str, model: str, scenario: str, stream: bool) -> Outcome:
    client = anthropic_client(base_url)
    messages: list[dict[str, Any]] = [{"role": "user", "content": USER}]
    if scenario == "tool_result_turn":
        messages += [
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "call_weather_1", "name": "get_weather", "input": {"city": "Paris"}}
                ],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "call_weather_1", "content": TOOL_RESULT}],
            },
        ]
    kwargs: dict[str, Any] = {
        "model": model,
        "max_tokens": max_tokens_for(scenario),
        "system": SYSTEM,
        "messages": messages,
    }
    tools = tools_for(scenario)
    if tools:
        kwargs["tools"] = [
            {"name": t["name"], "description": t["description"], "input_schema": t["parameters"]} for t in tools
        ]
    if scenario == "thinking":
        kwargs["thinking"] = {"type": "enabled", "budget_tokens": 2048}
    if stream:
        with client.messages.stream(**kwargs) as s:
            message = s.get_final_message()
    else:
        message = client.messages.create(**kwargs)
    out = Outcome(model=message.model, stop=message.stop_reason)
    for block in message.content:
        if block.type == "text":
            out.text += block.text
        elif block.type == "thinking":
            out.thinking += block.thinking
            if block.signature:
                out.signatures.append(block.signature)
        elif block.type == "tool_use":
            out.tools.append((block.name, dict(block.input)))
            out.tool_ids.append(block.id)
    u = message.usage
    out.usage = {
        "input_tokens": u.input_tokens,
        "output_tokens": u.output_tokens,
        "cache_read_input_tokens": u.cache_read_input_tokens,
        "cache_creation_input_tokens": u.cache_creation_input_tokens,
    }
    return out


# --------------------------------------------------------------------------- openai chat


def openai_client(base_url: str, key: str = "sk-caller") -> openai.OpenAI:
    return openai.OpenAI(base_url=base_url + "/v1", api_key=key, max_retries=0, timeout=20)


def chat_call(base_url: str, model: str, scenario: str, stream: bool) -> Outcome:
    client = openai_client(base_url)
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER}]
    if scenario == "tool_result_turn":
        messages += [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_weather_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_weather_1", "content": TOOL_RESULT},
        ]
    kwargs: dict[str, Any] = {"model": model, "messages": messages, "max_completion_tokens": max_tokens_for(scenario)}
    tools = tools_for(scenario)
    if tools:
        kwargs["tools"] = [{"type": "function", "function": t} for t in tools]
    if scenario == "thinking":
        kwargs["reasoning_effort"] = "low"
    out = Outcome()
    if not stream:
        completion = client.chat.completions.create(**kwargs)
        choice = completion.choices[0]
        out.model, out.stop = completion.model, choice.finish_reason
        out.text = choice.message.content or ""
        out.thinking = getattr(choice.message, "reasoning_content", None) or ""
        for call in choice.message.tool_calls or []:
            out.tools.append((call.function.name, parse_args(call.function.arguments)))
            out.tool_ids.append(call.id)
        usage = completion.usage
    else:
        calls: dict[int, dict[str, Any]] = {}
        usage = None
        for chunk in client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **kwargs):
            out.model = chunk.model
            if chunk.usage is not None:
                assert usage is None, "more than one usage chunk"
                usage = chunk.usage
            for choice in chunk.choices:
                delta = choice.delta
                if delta is None:  # Azure content-filter annotation chunks carry no delta
                    if choice.finish_reason:
                        out.stop = choice.finish_reason
                    continue
                out.text += delta.content or ""
                out.thinking += getattr(delta, "reasoning_content", None) or ""
                for call in delta.tool_calls or []:
                    slot = calls.setdefault(call.index, {"id": None, "name": None, "arguments": ""})
                    if call.id:
                        slot["id"] = call.id
                    if call.function and call.function.name:
                        slot["name"] = call.function.name
                    if call.function and call.function.arguments:
                        slot["arguments"] += call.function.arguments
                if choice.finish_reason:
                    out.stop = choice.finish_reason
        for index in sorted(calls):
            out.tools.append((calls[index]["name"], parse_args(calls[index]["arguments"])))
            out.tool_ids.append(calls[index]["id"])
    if usage is not None:
        out.usage = {
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
            "cached_tokens": usage.prompt_tokens_details.cached_tokens if usage.prompt_tokens_details else None,
            "reasoning_tokens": usage.completion_tokens_details.reasoning_tokens
            if usage.completion_tokens_details
            else None,
        }
    return out


# --------------------------------------------------------------------------- openai responses


def responses_call(base_url: str, model: str, scenario: str, stream: bool, helper: bool = True) -> Outcome:
    client = openai_client(base_url)
    items: list[dict[str, Any]] = [{"role": "user", "content": USER}]
    if scenario == "tool_result_turn":
        items += [
            {
                "type": "function_call",
                "call_id": "call_weather_1",
                "name": "get_weather",
                "arguments": '{"city": "Paris"}',
            },
            {"type": "function_call_output", "call_id": "call_weather_1", "output": TOOL_RESULT},
        ]
    kwargs: dict[str, Any] = {
        "model": model,
        "instructions": SYSTEM,
        "input": items,
        "max_output_tokens": max_tokens_for(scenario),
    }
    tools = tools_for(scenario)
    if tools:
        kwargs["tools"] = [{"type": "function", **t} for t in tools]
    if scenario == "thinking":
        kwargs["reasoning"] = {"effort": "low", "summary": "auto"}
    if not stream:
        response = client.responses.create(**kwargs)
    elif helper:
        with client.responses.stream(**kwargs) as s:
            terminal = None
            for event in s:
                if event.type in ("response.completed", "response.incomplete", "response.failed"):
                    terminal = event.response
            # get_final_response() only exists for completed responses (the SDK raises otherwise)
            response = s.get_final_response() if terminal is not None and terminal.status == "completed" else terminal
        assert response is not None, "no terminal event"
    else:
        response = None
        terminal = 0
        for event in client.responses.create(stream=True, **kwargs):
            if event.type in ("response.completed", "response.incomplete", "response.failed"):
                terminal += 1
                response = event.response
        assert terminal == 1, f"{terminal} terminal events"
        assert response is not None
    out = Outcome(model=response.model, text=response.output_text)
    out.stop = (
        response.status if response.status != "incomplete" else f"incomplete:{response.incomplete_details.reason}"
    )
    for item in response.output:
        if item.type == "function_call":
            out.tools.append((item.name, parse_args(item.arguments)))
            out.tool_ids.append(item.call_id)
        elif item.type == "reasoning":
            out.thinking += "".join(s.text for s in item.summary)
            if item.encrypted_content:
                out.signatures.append(item.encrypted_content)
    u = response.usage
    if u is not None:
        out.usage = {
            "input_tokens": u.input_tokens,
            "output_tokens": u.output_tokens,
            "cached_tokens": u.input_tokens_details.cached_tokens if u.input_tokens_details else None,
            "reasoning_tokens": u.output_tokens_details.reasoning_tokens if u.output_tokens_details else None,
        }
    return out


# --------------------------------------------------------------------------- gemini


def gemini_client(base_url: str, key: str = "caller-key") -> genai.Client:
    return genai.Client(
        api_key=key,
        http_options=gtypes.HttpOptions(
            base_url=base_url, timeout=20_000, retry_options=gtypes.HttpRetryOptions(attempts=1)
        ),
    )


def gemini_call(base_url: str, model: str, scenario: str, stream: bool) -> Outcome:
    client = gemini_client(base_url)
    contents: list[Any] = [gtypes.Content(role="user", parts=[gtypes.Part(text=USER)])]
    if scenario == "tool_result_turn":
        contents += [
            gtypes.Content(
                role="model",
                parts=[
                    gtypes.Part(
                        function_call=gtypes.FunctionCall(
                            id="call_weather_1", name="get_weather", args={"city": "Paris"}
                        )
                    )
                ],
            ),
            gtypes.Content(
                role="user",
                parts=[
                    gtypes.Part(
                        function_response=gtypes.FunctionResponse(
                            id="call_weather_1", name="get_weather", response=json.loads(TOOL_RESULT)
                        )
                    )
                ],
            ),
        ]
    config: dict[str, Any] = {"system_instruction": SYSTEM, "max_output_tokens": max_tokens_for(scenario)}
    tools = tools_for(scenario)
    if tools:
        config["tools"] = [
            gtypes.Tool(
                function_declarations=[
                    gtypes.FunctionDeclaration(
                        name=t["name"], description=t["description"], parameters_json_schema=t["parameters"]
                    )
                    for t in tools
                ]
            )
        ]
        config["automatic_function_calling"] = gtypes.AutomaticFunctionCallingConfig(disable=True)
    if scenario == "thinking":
        config["thinking_config"] = gtypes.ThinkingConfig(include_thoughts=True, thinking_budget=2048)
    cfg = gtypes.GenerateContentConfig(**config)
    out = Outcome()
    responses = (
        list(client.models.generate_content_stream(model=model, contents=contents, config=cfg))
        if stream
        else [client.models.generate_content(model=model, contents=contents, config=cfg)]
    )
    last_usage = None
    for response in responses:
        out.model = response.model_version
        if response.usage_metadata is not None:
            last_usage = response.usage_metadata
        for candidate in response.candidates or []:
            if candidate.finish_reason is not None:
                out.stop = (
                    candidate.finish_reason.value
                    if hasattr(candidate.finish_reason, "value")
                    else str(candidate.finish_reason)
                )
            for part in (candidate.content.parts if candidate.content else None) or []:
                if part.thought and part.text:
                    out.thinking += part.text
                elif part.text:
                    out.text += part.text
                if part.function_call is not None:
                    out.tools.append((part.function_call.name, dict(part.function_call.args or {})))
                    out.tool_ids.append(part.function_call.id)
                if part.thought_signature:
                    out.signatures.append(part.thought_signature)
    if last_usage is not None:
        out.usage = {
            "prompt_token_count": last_usage.prompt_token_count,
            "candidates_token_count": last_usage.candidates_token_count,
            "cached_content_token_count": last_usage.cached_content_token_count,
            "thoughts_token_count": last_usage.thoughts_token_count,
        }
    return out


# --------------------------------------------------------------------------- gemini interactions


class InteractionStreamError(Exception):
    """The Interactions SDKs yield an in-stream ``error`` event instead of raising; a caller must check."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


def interactions_call(base_url: str, model: str, scenario: str, stream: bool, store: bool = True) -> Outcome:
    client = gemini_client(base_url)
    steps: list[dict[str, Any]] = [{"type": "user_input", "content": [{"type": "text", "text": USER}]}]
    if scenario == "tool_result_turn":
        steps += [
            {"type": "function_call", "id": "call_weather_1", "name": "get_weather", "arguments": {"city": "Paris"}},
            {"type": "function_result", "call_id": "call_weather_1", "name": "get_weather", "result": TOOL_RESULT},
        ]
    config: dict[str, Any] = {"max_output_tokens": max_tokens_for(scenario)}
    if scenario == "thinking":
        config.update(thinking_level="low", thinking_summaries="auto")
    kwargs: dict[str, Any] = {
        "model": model,
        "input": steps,
        "system_instruction": SYSTEM,
        "generation_config": config,
        "store": store,
    }
    tools = tools_for(scenario)
    if tools:
        kwargs["tools"] = [{"type": "function", **t} for t in tools]
    out = Outcome()
    if stream:
        calls: dict[int, dict[str, Any]] = {}
        completed = None
        for event in client.interactions.create(stream=True, **kwargs):
            kind = event.event_type
            if kind == "error":
                raise InteractionStreamError(event.error.code, event.error.message)
            if kind == "interaction.created":
                out.model = event.interaction.model
            elif kind == "step.start" and event.step.type == "function_call":
                calls[event.index] = {"id": event.step.id, "name": event.step.name, "arguments": ""}
            elif kind == "step.delta":
                delta = event.delta
                if delta.type == "text":
                    out.text += delta.text
                elif delta.type == "thought_summary":
                    out.thinking += delta.content.text
                elif delta.type == "thought_signature":
                    out.signatures.append(delta.signature)
                elif delta.type == "arguments_delta":
                    calls[event.index]["arguments"] += delta.arguments
            elif kind == "interaction.completed":
                completed = event.interaction
        if completed is None:
            raise InteractionStreamError("truncated", "the stream ended without interaction.completed")
        for index in sorted(calls):
            out.tools.append((calls[index]["name"], parse_args(calls[index]["arguments"])))
            out.tool_ids.append(calls[index]["id"])
        interaction = completed
    else:
        interaction = client.interactions.create(**kwargs)
        out.model = interaction.model
        for step in interaction.steps or []:
            if step.type == "model_output":
                out.text += "".join(c.text for c in step.content or [] if c.type == "text")
            elif step.type == "thought":
                out.thinking += "".join(c.text for c in step.summary or [] if c.type == "text")
                if step.signature:
                    out.signatures.append(step.signature)
            elif step.type == "function_call":
                out.tools.append((step.name, dict(step.arguments or {})))
                out.tool_ids.append(step.id)
    if interaction.status == "failed":
        raise InteractionStreamError("failed", "the interaction failed")
    out.stop = interaction.status
    u = interaction.usage
    if u is not None:
        out.usage = {
            "total_input_tokens": u.total_input_tokens,
            "total_output_tokens": u.total_output_tokens,
            "total_cached_tokens": u.total_cached_tokens,
            "total_thought_tokens": u.total_thought_tokens,
        }
    return out


CALLERS = {
    "anthropic": anthropic_call,
    "openai-chat": chat_call,
    "openai-responses": responses_call,
    "gemini": gemini_call,
    "gemini-interactions": interactions_call,
}

ERRORS = {
    "anthropic": (anthropic.APIError,),
    "openai-chat": (openai.APIError,),
    "openai-responses": (openai.APIError,),
    "gemini": (genai.errors.APIError,),
    "gemini-interactions": (InteractionStreamError, Exception),
}


def error_status(exc: BaseException) -> int | None:
    for attr in ("status_code", "code"):
        value = getattr(exc, attr, None)
        if isinstance(value, int):
            return value
    return None
