"""A fake upstream provider: a real HTTP server on 127.0.0.1 that replays files from ``captures/``.

It speaks all four dialects' endpoints. The scenario is chosen by the model name the gateway sends
upstream: ``<anything>--<scenario>`` replays ``captures/<dialect>/<scenario>.sse`` (or, for
``error_429`` / ``error_500``, answers that status with ``<scenario>.json``). Every request is
recorded (path, query, headers, parsed body) so tests can check what the upstream received.

Fault scenarios (issue 5) are built in: ``reset`` (cut the TCP connection mid-event), ``stall``
(send a little, then nothing), ``slow_first`` (sleep before the headers), ``retry_after`` (429 with
``Retry-After: 0`` once per model, then the ``text`` answer).

Models named like the wire (``SCENARIO_WORDS``: ``text``, ``length``, ``message`` …) replay their
scenario too, and the stream then names that model where the captured one stood, as a real
provider echoes the model it was asked for: a gateway that renames the model anywhere else in a
frame breaks those answers.
"""

from __future__ import annotations

import asyncio
import re
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import uvicorn

CAPTURES = Path(__file__).resolve().parents[2] / "captures"


@dataclass
class Received:
    dialect: str
    path: str
    query: str
    headers: dict[str, str]
    body: dict[str, Any]
    disconnected: bool = False  # the gateway closed the connection before the reply ended
    disconnected_at: float | None = None  # time.monotonic() when the fake saw it


# scenario -> an upstream model name that is also a word of the streams (a key, a type, a stop reason)
SCENARIO_WORDS = {
    "text": "text",
    "tool_call": "message",
    "parallel_tool_calls": "tool_use",
    "tool_result_turn": "function",
    "thinking": "thinking",
    "max_tokens": "length",
    "long_500": "assistant",
    "error_mid_stream": "error",
    "cut_mid_event": "model",
    "no_terminator": "stop",
    "error_429": "end_turn",
    "error_500": "STOP",
}
WORD_SCENARIOS = {word: scenario for scenario, word in SCENARIO_WORDS.items()}
_CAPTURED_MODEL = re.compile(rb'"(?:model|modelVersion)"\s*:\s*("(?:[^"\\]|\\.)+")')


def echo_model(data: bytes, model: str) -> bytes:
    """``data`` naming ``model`` where it named the captured model (the captured names occur nowhere else)."""
    for captured in set(_CAPTURED_MODEL.findall(data)):
        data = data.replace(captured, orjson.dumps(model))
    return data


COUNTED_TOKENS = 4242  # what the fake's count_tokens / countTokens answer


async def read_request(scope: dict[str, Any], receive: Any, send: Any) -> bytes | None:
    """For a test ASGI upstream: answer the lifespan protocol (``None``), else the request's whole body."""
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            await send({"type": message["type"] + ".complete"})
            if message["type"] == "lifespan.shutdown":
                return None
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


@dataclass
class FakeUpstream:
    captures: Path = CAPTURES
    received: list[Received] = field(default_factory=list)
    open_connections: int = 0
    closed_early: int = 0
    hits: dict[str, int] = field(default_factory=dict)
    port: int = 0
    active: int = 0  # requests being answered right now
    stall_seconds: float = 30.0
    pause_seconds: float = 1.3  # the silence in the middle of the pause scenario
    slow_delay: float = 0.01  # seconds between events of the slow_stream scenario
    pause_seconds: float = 1.3  # the silence in the middle of the pause scenario
    interactions: dict[str, list[bytes]] = field(default_factory=dict)  # id -> frames, for GET resume
    resumes: int = 0

    def dialect_of(self, path: str) -> str | None:
        if path.endswith("/messages") or path.endswith("/messages/count_tokens"):
            return "anthropic"
        if path.endswith("/chat/completions"):
            return "openai-chat"
        if path.endswith("/responses"):
            return "openai-responses"
        if ":streamGenerateContent" in path or ":generateContent" in path or ":countTokens" in path:
            return "gemini"
        if path.endswith("/interactions"):
            return "gemini-interactions"
        return None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        raw = await read_request(scope, receive, send)
        if raw is None:
            return
        path = scope["path"]
        dialect = self.dialect_of(path)
        body = orjson.loads(raw) if raw else {}
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        record = Received(dialect or "?", path, scope.get("query_string", b"").decode(), headers, body)
        self.received.append(record)

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            record.disconnected = True
            record.disconnected_at = time.monotonic()

        watcher = asyncio.ensure_future(watch())
        self.active += 1
        try:
            await self._reply(dialect, path, body, scope, send)
        finally:
            self.active -= 1
            await asyncio.sleep(0.05)  # let a pending disconnect be seen
            watcher.cancel()

    async def _reply(
        self, dialect: str | None, path: str, body: dict[str, Any], scope: dict[str, Any], send: Any
    ) -> None:
        if dialect is None and scope["method"] == "GET" and "/interactions/" in path:
            await self._resume_interaction(path.rsplit("/", 1)[1], scope.get("query_string", b"").decode(), send)
            return
        if dialect is None:
            await self._json(send, 404, {"error": "no such endpoint"})
            return
        if path.endswith("/count_tokens"):  # the providers' own counting endpoints
            await self._json(send, 200, {"input_tokens": COUNTED_TOKENS})
            return
        if path.endswith(":countTokens"):
            await self._json(send, 200, {"totalTokens": COUNTED_TOKENS})
            return
        if dialect == "gemini":
            model = path.split("/models/", 1)[1].rsplit(":", 1)[0]
        else:
            model = str(body.get("model", ""))
        scenario = model.split("--", 1)[1] if "--" in model else WORD_SCENARIOS.get(model, "text")
        self.hits[model] = self.hits.get(model, 0) + 1
        folder = self.captures / dialect
        if scenario.startswith(("error_429", "error_500")):  # error_429, error_429_insufficient_quota …
            await self._json(
                send, int(scenario.split("_")[1]), orjson.loads((folder / f"{scenario}.json").read_bytes())
            )
            return
        if scenario == "retry_after" and self.hits[model] == 1:
            await self._json(
                send, 429, orjson.loads((folder / "error_429.json").read_bytes()), [(b"retry-after", b"0")]
            )
            return
        if scenario == "retry_after":
            scenario = "text"
        if scenario == "slow_first":
            await asyncio.sleep(self.stall_seconds)
            scenario = "text"
        if scenario == "slow_stream":
            await self._slow_stream(dialect, send)
            return
        if scenario == "drop_resume":  # Interactions: cut after half the events; GET resumes
            frames = [f + b"\n\n" for f in (folder / "text.sse").read_bytes().split(b"\n\n") if f.strip()]
            first = orjson.loads(frames[0].split(b"data: ", 1)[1])
            self.interactions[first["interaction"]["id"]] = frames
            await send(
                {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]}
            )
            await send(
                {
                    "type": "http.response.body",
                    "body": b"".join(frames[: len(frames) // 2]) + frames[len(frames) // 2][:20],
                    "more_body": True,
                }
            )
            raise ConnectionResetError("dropped by the fake upstream")
        data = (folder / f"{'text' if scenario in ('reset', 'stall', 'pause') else scenario}.sse").read_bytes()
        if model in WORD_SCENARIOS:
            data = echo_model(data, model)
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        self.open_connections += 1
        try:
            if scenario == "pause":  # silent for a while mid-answer, then the rest
                await send({"type": "http.response.body", "body": data[: len(data) // 2], "more_body": True})
                await asyncio.sleep(self.pause_seconds)
                await send({"type": "http.response.body", "body": data[len(data) // 2 :], "more_body": False})
                return
            if scenario in ("reset", "stall"):
                half = data[: len(data) // 2]
                await send({"type": "http.response.body", "body": half, "more_body": True})
                if scenario == "stall":
                    await asyncio.sleep(self.stall_seconds)
                    return
                raise ConnectionResetError("reset by the fake upstream")
            # Send in several writes so the gateway sees real streaming, not one buffer.
            step = max(1, len(data) // 8)
            for i in range(0, len(data), step):
                await send({"type": "http.response.body", "body": data[i : i + step], "more_body": True})
                await asyncio.sleep(0)
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except asyncio.CancelledError:
            self.closed_early += 1
            raise
        finally:
            self.open_connections -= 1

    async def _resume_interaction(self, iid: str, query: str, send: Any) -> None:
        from urllib.parse import parse_qs

        frames = self.interactions.pop(iid, None)  # one resume per dropped stream
        if frames is None:
            await self._json(send, 404, {"error": {"code": "not_found", "message": f"interaction {iid} not found"}})
            return
        self.resumes += 1
        last = parse_qs(query).get("last_event_id", [None])[0]
        start = 0
        for i, frame in enumerate(frames):
            if last is not None and f'"event_id":"{last}"'.encode() in frame:
                start = i + 1
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        await send({"type": "http.response.body", "body": b"".join(frames[start:]), "more_body": False})

    async def _slow_stream(self, dialect: str, send: Any) -> None:
        """The ``long_500`` answer, one event every ``slow_delay`` seconds (disconnect and resume tests)."""
        data = (self.captures / dialect / "long_500.sse").read_bytes()
        sep = b"\r\n\r\n" if dialect == "gemini" else b"\n\n"  # (Interactions uses LF like the others)
        frames = [f + sep for f in data.split(sep) if f.strip()]
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        for frame in frames:
            await send({"type": "http.response.body", "body": frame, "more_body": True})
            await asyncio.sleep(self.slow_delay)
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    @staticmethod
    async def _json(send: Any, status: int, body: Any, extra: list[tuple[bytes, bytes]] | None = None) -> None:
        payload = orjson.dumps(body)
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"application/json"), *(extra or [])],
            }
        )
        await send({"type": "http.response.body", "body": payload})

    def last(self, dialect: str | None = None) -> Received:
        for item in reversed(self.received):
            if dialect is None or item.dialect == dialect:
                return item
        raise AssertionError("the fake upstream received nothing")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerThread:
    """Run an ASGI app under uvicorn on a loopback port in a background thread."""

    def __init__(self, app: Any, port: int | None = None, **kwargs: Any) -> None:
        self.port = port or free_port()
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning", access_log=False, **kwargs)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> ServerThread:
        self.thread.start()
        deadline = time.time() + 10
        while not self.server.started:
            if time.time() > deadline or not self.thread.is_alive():
                raise RuntimeError("server did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"
