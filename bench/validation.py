"""Per-request cost of caller-side validation (``gateway/dialects/validation.py``).

Times ``validate_request`` on the bodies the coding agents really send (from
``tests/server/test_bad_input_validation.py``) and on a long conversation, in-process, best of 5 runs.
Run: ``.venv/bin/python bench/validation.py``. The figures go in ``bench/README.md``.
"""

from __future__ import annotations

import copy
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import orjson

from gateway.dialects.base import RequestMeta
from gateway.dialects.registry import codec_for
from gateway.dialects.validation import validate_request
from tests.server.test_bad_input_validation import CLAUDE_CODE, CODEX, GEMINI_CLI


def long_history(turns: int) -> dict[str, Any]:
    body = copy.deepcopy(CLAUDE_CODE)
    messages = [{"role": "user", "content": "hi"}]
    for i in range(turns):
        messages.append(
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": f"toolu_{i}", "name": "Read", "input": {"file_path": "/x"}}],
            }
        )
        messages.append(
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": "1\tline"}]}
        )
    body["messages"] = messages
    return body


def per_call_us(fn: Any, n: int) -> float:
    """Best of 5, in this thread's CPU time (the machine is shared: wall time would count others' work)."""
    best = float("inf")
    for _ in range(5):
        started = time.thread_time()
        for _ in range(n):
            fn()
        best = min(best, (time.thread_time() - started) / n * 1e6)
    return best


def main() -> None:
    cases = [
        ("anthropic", "Claude Code turn (12 fields, 2 tools)", CLAUDE_CODE, RequestMeta()),
        ("anthropic", "Claude Code, 100 tool round trips (201 messages)", long_history(100), RequestMeta()),
        ("openai-responses", "Codex turn (3 tools, 2 input items)", CODEX, RequestMeta()),
        ("gemini", "Gemini CLI turn", GEMINI_CLI, RequestMeta(path_model="smart")),
        (
            "openai-chat",
            "minimal chat request",
            {"model": "m", "messages": [{"role": "user", "content": "hi"}]},
            RequestMeta(),
        ),
    ]
    print(f"{'dialect':17} {'body':50} {'validate':>9} {'parse':>9} {'orjson':>9}   (µs per request)")
    for dialect, name, body, meta in cases:
        n = 500 if "round trips" in name else 5_000
        raw = orjson.dumps(body)
        codec = codec_for(dialect)
        validate = per_call_us(lambda dialect=dialect, body=body, meta=meta: validate_request(dialect, body, meta), n)
        parse = per_call_us(lambda codec=codec, body=body, meta=meta: codec.parse_request(body, meta), n)
        loads = per_call_us(lambda raw=raw: orjson.loads(raw), n)
        print(f"{dialect:17} {name:50} {validate:9.2f} {parse:9.2f} {loads:9.2f}")


if __name__ == "__main__":
    main()
