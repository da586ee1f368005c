"""Several upstream deployments behind one loopback OpenAI-chat server, told apart by model name.

A route's targets are ``up:a``, ``up:b``, … (one provider, upstream models ``a``, ``b``): the
server records which model each request reached (``hits``), and each model's behaviour is set per
test in ``behaviour``: ``fail`` = [status, …] answered (in order) before it answers normally again,
``retry_after`` = that header on those failures, ``delay`` = seconds before the headers,
``hold`` = seconds a stream stays open after its first token when the prompt says "hold",
``cut`` = the stream is cut after its first token.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import orjson

from tests.support.fake_upstream import read_request


@dataclass
class Behaviour:
    fail: list[int] = field(default_factory=list)
    always_fail: int | None = None
    retry_after: str | None = None
    delay: float = 0.0
    hold: float = 0.0
    cut: bool = False


class Deployments:
    def __init__(self) -> None:
        self.hits: list[str] = []
        self.behaviour: dict[str, Behaviour] = {}
        self.open: dict[str, int] = {}

    def reset(self) -> None:
        self.hits.clear()
        self.behaviour.clear()

    def count(self, model: str) -> int:
        return self.hits.count(model)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        raw = await read_request(scope, receive, send)
        if raw is None:
            return
        body = orjson.loads(raw)
        model = body["model"]
        self.hits.append(model)
        b = self.behaviour.setdefault(model, Behaviour())
        if b.delay:
            await asyncio.sleep(b.delay)
        status = b.fail.pop(0) if b.fail else b.always_fail
        if status is not None:
            headers = [(b"content-type", b"application/json")]
            if b.retry_after is not None:
                headers.append((b"retry-after", b.retry_after.encode()))
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send(
                {
                    "type": "http.response.body",
                    "body": orjson.dumps(
                        {"error": {"message": f"{model} failing", "type": "server_error", "code": None}}
                    ),
                }
            )
            return
        text = f"from {model}"
        if not body.get("stream"):
            answer = {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 1,
                "model": model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
            }
            await send(
                {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]}
            )
            await send({"type": "http.response.body", "body": orjson.dumps(answer)})
            return

        def chunk(delta: dict[str, Any], finish: str | None = None, usage: dict[str, int] | None = None) -> bytes:
            obj: dict[str, Any] = {
                "id": "chatcmpl-1",
                "object": "chat.completion.chunk",
                "created": 1,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}] if usage is None else [],
            }
            if usage is not None:
                obj["usage"] = usage
            return b"data: " + orjson.dumps(obj) + b"\n\n"

        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        await send(
            {"type": "http.response.body", "body": chunk({"role": "assistant", "content": text}), "more_body": True}
        )
        if b.cut:
            raise ConnectionResetError("cut after the first token")
        self.open[model] = self.open.get(model, 0) + 1
        try:
            if b.hold and "hold" in raw.decode():
                await asyncio.sleep(b.hold)
        finally:
            self.open[model] -= 1
        tail = (
            chunk({}, "stop")
            + chunk({}, usage={"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5})
            + b"data: [DONE]\n\n"
        )
        await send({"type": "http.response.body", "body": tail, "more_body": False})
