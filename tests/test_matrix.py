"""The conformance matrix: every caller SDK × every upstream dialect × every scenario, stream and whole.

The gateway runs on a real loopback port; the upstream is a real loopback server replaying
``captures/<dialect>/<scenario>.sse``. Every route's upstream model is a word of the streams
(``text``, ``length``, ``message``, ``thinking`` …, echoed by the fake as a real provider does), so
a gateway that touches anything but the model field when it renames the model fails here. Each cell asserts what the application sees through the
official SDK (exact text, tools and parsed arguments, stop reason, usage in the caller's own
meaning) and what the upstream received (model, system prompt, turns, tools, tool results,
limits, its own key). Failure cells assert that the SDK raises. The results are written to
``docs/compatibility.md`` at the end of the run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gateway.dialects import registry
from tests.conftest import UPSTREAM_DIALECTS, word_model
from tests.support.callers import CALLERS, ERRORS, SYSTEM, TOOL_RESULT, USER, Outcome, error_status, responses_call
from tests.support.fake_upstream import SCENARIO_WORDS, FakeUpstream, Received

CALLER_DIALECTS = registry.caller_dialects()  # every dialect the gateway serves to callers

ANSWERS: dict[str, dict[str, Any]] = {
    "text": {"text": "Hello from the gateway. 你好 — ok!", "stop": "stop", "usage": (30, 10, 12, None)},
    "tool_call": {
        "text": "Let me check.",
        "tools": [("get_weather", {"city": "Paris", "unit": "celsius"})],
        "stop": "tool_use",
        "usage": (50, 0, 20, None),
    },
    "parallel_tool_calls": {
        "text": "",
        "tools": [("get_weather", {"city": "Paris"}), ("get_time", {"timezone": "Europe/Paris"})],
        "stop": "tool_use",
        "usage": (60, 0, 30, None),
    },
    "tool_result_turn": {"text": "It is 18°C in Paris.", "stop": "stop", "usage": (80, 0, 10, None)},
    "thinking": {
        "text": "Hi there!",
        "thinking": "The user wants a greeting. I will say hi.",
        "stop": "stop",
        "usage": (30, 0, 40, 25),
    },
    "max_tokens": {"text": "The answer is cut", "stop": "length", "usage": (30, 0, 16, None)},
    "long_500": {"text": "".join(f"w{i} " for i in range(500)), "stop": "stop", "usage": (30, 0, 500, None)},
}
FAILURES = ["error_mid_stream", "cut_mid_event", "no_terminator"]
HTTP_ERRORS = {"error_429": 429, "error_500": 500}
SCENARIOS = [*ANSWERS, *FAILURES, *HTTP_ERRORS]

STOPS = {
    "anthropic": {"stop": "end_turn", "tool_use": "tool_use", "length": "max_tokens"},
    "openai-chat": {"stop": "stop", "tool_use": "tool_calls", "length": "length"},
    "openai-responses": {"stop": "completed", "tool_use": "completed", "length": "incomplete:max_output_tokens"},
    "gemini": {"stop": "STOP", "tool_use": "STOP", "length": "MAX_TOKENS"},
    "gemini-interactions": {"stop": "completed", "tool_use": "requires_action", "length": "incomplete"},
}

RESULTS: dict[tuple[str, str, str, str], bool] = {}


def expected_usage(caller: str, upstream: str, usage: tuple[int, int, int, int | None]) -> dict[str, Any]:
    inp, cached, out, reasoning = usage
    if upstream == "anthropic":
        reasoning = None  # Anthropic does not report thinking tokens separately
    if caller == "anthropic":
        return {"input_tokens": inp - cached, "output_tokens": out, "cache_read_input_tokens": cached}
    if caller == "openai-chat":
        return {
            "prompt_tokens": inp,
            "completion_tokens": out,
            "cached_tokens": cached,
            "reasoning_tokens": reasoning or 0,
        }
    if caller == "openai-responses":
        return {"input_tokens": inp, "output_tokens": out, "cached_tokens": cached, "reasoning_tokens": reasoning or 0}
    if caller == "gemini-interactions":
        return {
            "total_input_tokens": inp,
            "total_output_tokens": out - (reasoning or 0),
            "total_cached_tokens": cached,
            "total_thought_tokens": reasoning or 0,
        }
    return {
        "prompt_token_count": inp,
        "candidates_token_count": out - (reasoning or 0),
        "cached_content_token_count": cached or None,
        "thoughts_token_count": reasoning or None,
    }


def check_usage(caller: str, got: dict[str, Any], want: dict[str, Any]) -> None:
    for key, value in want.items():
        actual = got.get(key)
        if value in (0, None):
            assert actual in (0, None), f"usage {key}: {actual!r} != {value!r}"
        else:
            assert actual == value, f"usage {key}: {actual!r} != {value!r} (all: {got})"


def upstream_view(r: Received) -> dict[str, Any]:
    """What the upstream received, read independently of the gateway's codecs."""
    b = r.body
    view: dict[str, Any] = {
        "system": "",
        "texts": [],
        "tools": [],
        "limit": None,
        "model": None,
        "results": [],
        "calls": [],
    }
    if r.dialect == "anthropic":
        system = b.get("system")
        view["system"] = system if isinstance(system, str) else "".join(x.get("text", "") for x in system or [])
        view["model"], view["limit"] = b.get("model"), b.get("max_tokens")
        view["tools"] = [t["name"] for t in b.get("tools", [])]
        for m in b["messages"]:
            content = m["content"] if isinstance(m["content"], list) else [{"type": "text", "text": m["content"]}]
            for c in content:
                if c["type"] == "text":
                    view["texts"].append(c["text"])
                elif c["type"] == "tool_use":
                    view["calls"].append((c["id"], c["name"]))
                elif c["type"] == "tool_result":
                    text = (
                        c["content"]
                        if isinstance(c["content"], str)
                        else "".join(x.get("text", "") for x in c["content"])
                    )
                    view["results"].append((c["tool_use_id"], text))
        view["key"] = r.headers.get("x-api-key")
    elif r.dialect == "openai-chat":
        view["model"], view["limit"] = b.get("model"), b.get("max_completion_tokens", b.get("max_tokens"))
        view["tools"] = [t["function"]["name"] for t in b.get("tools", [])]
        for m in b["messages"]:
            content = m.get("content")
            text = content if isinstance(content, str) else "".join(x.get("text", "") for x in content or [])
            if m["role"] in ("system", "developer"):
                view["system"] += text
            elif m["role"] == "tool":
                view["results"].append((m["tool_call_id"], text))
            else:
                if text:
                    view["texts"].append(text)
                for call in m.get("tool_calls") or []:
                    view["calls"].append((call["id"], call["function"]["name"]))
        view["key"] = r.headers.get("authorization")
    elif r.dialect == "openai-responses":
        view["model"], view["limit"] = b.get("model"), b.get("max_output_tokens")
        view["system"] = b.get("instructions") or ""
        view["tools"] = [t["name"] for t in b.get("tools", []) if t.get("type") == "function"]
        items = b["input"] if isinstance(b["input"], list) else [{"role": "user", "content": b["input"]}]
        for item in items:
            kind = item.get("type", "message")
            if kind == "message":
                content = item["content"]
                text = content if isinstance(content, str) else "".join(x.get("text", "") for x in content)
                if item["role"] in ("system", "developer"):
                    view["system"] += text
                else:
                    view["texts"].append(text)
            elif kind == "function_call":
                view["calls"].append((item["call_id"], item["name"]))
            elif kind == "function_call_output":
                output = item["output"]
                view["results"].append(
                    (item["call_id"], output if isinstance(output, str) else "".join(x.get("text", "") for x in output))
                )
        view["key"] = r.headers.get("authorization")
    elif r.dialect == "gemini-interactions":
        view["model"], view["system"] = b.get("model"), b.get("system_instruction") or ""
        view["limit"] = (b.get("generation_config") or {}).get("max_output_tokens")
        view["tools"] = [t["name"] for t in b.get("tools", []) if t.get("type") == "function"]
        steps = (
            b["input"]
            if isinstance(b["input"], list)
            else [{"type": "user_input", "content": [{"type": "text", "text": b["input"]}]}]
        )
        for step in steps:
            kind = step.get("type")
            if kind in ("user_input", "model_output"):
                content = step.get("content") or []
                view["texts"] += [c["text"] for c in content if c.get("type") == "text"]
            elif kind == "function_call":
                view["calls"].append((step["id"], step["name"]))
            elif kind == "function_result":
                result = step["result"]
                text = (
                    result
                    if isinstance(result, str)
                    else json.dumps(result)
                    if isinstance(result, dict)
                    else "".join(x.get("text", "") for x in result)
                )
                view["results"].append((step["call_id"], text))
        view["key"] = r.headers.get("x-goog-api-key")
    else:
        view["model"] = r.path.split("/models/", 1)[1].rsplit(":", 1)[0]
        view["system"] = "".join(p.get("text", "") for p in (b.get("systemInstruction") or {}).get("parts", []))
        view["limit"] = (b.get("generationConfig") or {}).get("maxOutputTokens")
        view["tools"] = [f["name"] for t in b.get("tools", []) for f in t.get("functionDeclarations", [])]
        for content in b["contents"]:
            for part in content["parts"]:
                if "text" in part and not part.get("thought"):
                    view["texts"].append(part["text"])
                if "functionCall" in part:
                    view["calls"].append((part["functionCall"].get("id"), part["functionCall"]["name"]))
                if "functionResponse" in part:
                    fr = part["functionResponse"]
                    view["results"].append((fr.get("name"), json.dumps(fr["response"], sort_keys=True)))
        view["key"] = r.headers.get("x-goog-api-key")
    return view


def check_upstream(fake: FakeUpstream, upstream: str, model: str, scenario: str) -> None:
    view = upstream_view(fake.last(upstream))
    assert view["model"] == SCENARIO_WORDS[scenario], (
        f"the route sends upstream model {SCENARIO_WORDS[scenario]!r} (caller asked {model!r})"
    )
    assert SYSTEM in view["system"]
    assert USER in view["texts"]
    assert view["key"] is not None and "sk-upstream" in view["key"] and "sk-caller" not in view["key"]
    want_tools = {
        "tool_call": ["get_weather"],
        "tool_result_turn": ["get_weather"],
        "parallel_tool_calls": ["get_weather", "get_time"],
    }.get(scenario, [])
    assert view["tools"] == want_tools
    if scenario == "max_tokens":
        assert view["limit"] == 16
    elif upstream in ("anthropic",):
        assert view["limit"] is not None
    if scenario == "tool_result_turn":
        assert len(view["calls"]) == 1 and view["calls"][0][1] == "get_weather"
        assert len(view["results"]) == 1
        key, text = view["results"][0]
        if upstream == "gemini":
            assert key == "get_weather"  # the function's name, recovered from the earlier call
            assert json.loads(text) == json.loads(TOOL_RESULT)
        else:
            assert key == view["calls"][0][0]  # the result answers that call
            assert json.loads(text) == json.loads(TOOL_RESULT)


def check_answer(caller: str, upstream: str, scenario: str, out: Outcome, model: str) -> None:
    want = ANSWERS[scenario]
    assert out.text == want["text"]
    assert out.tools == want.get("tools", [])
    assert out.stop == STOPS[caller][want["stop"]]
    assert out.thinking == want.get("thinking", "")
    assert out.model == model
    check_usage(caller, out.usage, expected_usage(caller, upstream, want["usage"]))
    if out.tools:
        assert all(out.tool_ids), "every tool call has an id"


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("upstream", UPSTREAM_DIALECTS)
@pytest.mark.parametrize("caller", CALLER_DIALECTS)
def test_cell(gateway: Any, fake: FakeUpstream, caller: str, upstream: str, scenario: str, stream: bool) -> None:
    model = word_model(upstream, scenario)
    call = CALLERS[caller]
    key = (caller, upstream, scenario, "stream" if stream else "whole")
    RESULTS[key] = False
    if scenario in ANSWERS:
        out = call(gateway.url, model, scenario, stream)
        check_answer(caller, upstream, scenario, out, model)
        check_upstream(fake, upstream, model, scenario)
        if caller == "openai-responses" and stream:
            # the raw event iterator too, not only the stream() accumulator
            again = responses_call(gateway.url, model, scenario, stream, helper=False)
            check_answer(caller, upstream, scenario, again, model)
    elif scenario in HTTP_ERRORS:
        with pytest.raises(ERRORS[caller]) as info:
            call(gateway.url, model, scenario, stream)
        assert error_status(info.value) == HTTP_ERRORS[scenario]
    else:
        with pytest.raises(ERRORS[caller]):
            call(gateway.url, model, scenario, stream)
    RESULTS[key] = True


def write_compatibility(path: Path) -> None:
    lines = [
        "# Compatibility matrix",
        "",
        "Generated by `tests/test_matrix.py` on every full test run: each cell is the official SDK of the",
        "caller dialect talking through the gateway to a fake upstream (a real loopback server) replaying",
        "`captures/<upstream>/<scenario>.sse`. ✅ = passed streaming and whole; otherwise the failing modes.",
        "",
    ]
    for scenario in SCENARIOS:
        lines += [
            f"## {scenario}",
            "",
            "| caller \\ upstream | " + " | ".join(UPSTREAM_DIALECTS) + " |",
            "|---|" + "---|" * len(UPSTREAM_DIALECTS),
        ]
        for caller in CALLER_DIALECTS:
            cells = []
            for upstream in UPSTREAM_DIALECTS:
                failed = [m for m in ("stream", "whole") if not RESULTS.get((caller, upstream, scenario, m), False)]
                cells.append("✅" if not failed else "❌ " + ", ".join(failed))
            lines.append(f"| {caller} | " + " | ".join(cells) + " |")
        lines.append("")
    path.write_text("\n".join(lines))


@pytest.fixture(scope="module", autouse=True)
def _compatibility_report() -> Any:
    yield
    total = len(CALLER_DIALECTS) * len(UPSTREAM_DIALECTS) * len(SCENARIOS) * 2
    if len(RESULTS) == total:  # only a full run rewrites the committed table
        write_compatibility(Path(__file__).resolve().parents[1] / "docs" / "compatibility.md")
