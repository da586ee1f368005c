"""A fast fake LLM upstream for benchmarks: a real HTTP/1.1 server on loopback, on raw asyncio streams.

It shares no code with the gateway. It answers the four streaming endpoints a gateway calls:

  POST /v1/messages                                      Anthropic SSE (message_start ... message_stop)
  POST /v1/chat/completions                              OpenAI chat SSE (+ include_usage chunk, data: [DONE])
  POST /v1/responses                                     OpenAI Responses SSE (sequence_number from 0)
  POST /v1beta/models/{model}:streamGenerateContent      Gemini SSE (CRLF CRLF framing, no terminator)

A request that does not ask for a stream (no ``"stream": true`` in the body; Gemini's
``:generateContent``) gets the whole answer as one JSON body in its dialect (``whole()``), the
same text in one piece. ``POST /v1/traces`` and ``/v1/metrics`` answer an empty 200 (an OTLP
collector that discards, for tracing runs).

Each reply streams N text fragments of a deterministic text (``fragments(n)``; the load generator
checks it byte for byte). N is, in order of precedence: the ``x-bench-chunks`` request header, a
``chunks<N>`` token in the model name (JSON body or Gemini URL), the ``--chunks`` flag (default 50).
A ``x-bench-corrupt`` header (``text`` | ``count`` | ``truncate``) or a ``corrupt-<kind>`` token in
the model name breaks the reply on purpose, so tests can prove the load generator notices.

Replies are pre-built bytes, cached per (dialect, N, corruption): per request the fake only parses the
request head, reads the body and writes. Each SSE event goes out as its own HTTP chunk
(Transfer-Encoding: chunked), all in one write — or, with a ``gap<N>`` token in the model name
(``x-bench-gap-us`` header), each in its own write N µs apart, so every event reaches the gateway
in its own socket read, as a real model's tokens do. Keep-alive is supported (httpx pools connections); ``GET /stats`` reports requests and connections
accepted so far, so a client that opens a connection per request shows up.

    python bench/fake_upstream.py --port 9100 [--chunks 50] [--host 127.0.0.1]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import socket
import threading
from collections.abc import Callable

DIALECTS = ("anthropic", "openai-chat", "openai-responses", "gemini")
DEFAULT_CHUNKS = 50
MODEL = "bench-model"

_WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "café",
    "naïve",
    '"quoted"',
    "back\\slash",
    "tab\there",
    "日本語",
    "emoji😀",
    "line\nbreak",
]


def fragment(i: int) -> str:
    """The i-th text fragment: deterministic, with JSON escapes and multi-byte UTF-8 on purpose."""
    return f"{_WORDS[i % len(_WORDS)]}{i} "


def fragments(n: int) -> list[str]:
    return [fragment(i) for i in range(n)]


def expected_text(n: int) -> str:
    return "".join(fragments(n))


# ---------------------------------------------------------------------------------------------
# reply bodies (lists of SSE events as bytes)


def _j(obj: object) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def _sse(data: object, event: str | None = None, eol: str = "\n") -> bytes:
    head = f"event: {event}{eol}" if event else ""
    return f"{head}data: {_j(data) if not isinstance(data, str) else data}{eol}{eol}".encode()


def _anthropic(frags: list[str]) -> list[bytes]:
    usage_in = {"input_tokens": 12, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 1}
    out = [
        _sse(
            {
                "type": "message_start",
                "message": {
                    "id": "msg_bench",
                    "type": "message",
                    "role": "assistant",
                    "model": MODEL,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": usage_in,
                },
            },
            "message_start",
        ),
        _sse(
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            "content_block_start",
        ),
        _sse({"type": "ping"}, "ping"),
    ]
    out += [
        _sse(
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": f}},
            "content_block_delta",
        )
        for f in frags
    ]
    out += [
        _sse({"type": "content_block_stop", "index": 0}, "content_block_stop"),
        _sse(
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": len(frags)},
            },
            "message_delta",
        ),
        _sse({"type": "message_stop"}, "message_stop"),
    ]
    return out


def _openai_chat(frags: list[str]) -> list[bytes]:
    base = {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": MODEL,
        "system_fingerprint": None,
    }

    def chunk(delta: dict, finish: str | None = None) -> bytes:
        return _sse(
            {
                **base,
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
                "usage": None,
            }
        )

    out = [chunk({"role": "assistant", "content": "", "refusal": None})]
    out += [chunk({"content": f}) for f in frags]
    out.append(chunk({}, "stop"))
    out.append(
        _sse(
            {
                **base,
                "choices": [],
                "usage": {
                    "prompt_tokens": 12,
                    "completion_tokens": len(frags),
                    "total_tokens": 12 + len(frags),
                    "prompt_tokens_details": {"cached_tokens": 0},
                    "completion_tokens_details": {"reasoning_tokens": 0},
                },
            }
        )
    )
    out.append(b"data: [DONE]\n\n")
    return out


def _openai_responses(frags: list[str]) -> list[bytes]:
    seq = iter(range(1 << 30))
    resp = {
        "id": "resp_bench",
        "object": "response",
        "created_at": 1700000000,
        "status": "in_progress",
        "model": MODEL,
        "output": [],
        "usage": None,
    }
    item_id = "msg_bench"
    text = "".join(frags)

    def ev(kind: str, **fields: object) -> bytes:
        return _sse({"type": kind, **fields, "sequence_number": next(seq)}, kind)

    part_done = {"type": "output_text", "annotations": [], "logprobs": [], "text": text}
    item_done = {"id": item_id, "type": "message", "status": "completed", "role": "assistant", "content": [part_done]}
    out = [
        ev("response.created", response=resp),
        ev("response.in_progress", response=resp),
        ev(
            "response.output_item.added",
            output_index=0,
            item={"id": item_id, "type": "message", "status": "in_progress", "role": "assistant", "content": []},
        ),
        ev(
            "response.content_part.added",
            item_id=item_id,
            output_index=0,
            content_index=0,
            part={"type": "output_text", "annotations": [], "logprobs": [], "text": ""},
        ),
    ]
    out += [
        ev("response.output_text.delta", item_id=item_id, output_index=0, content_index=0, delta=f, logprobs=[])
        for f in frags
    ]
    usage = {
        "input_tokens": 12,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": len(frags),
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 12 + len(frags),
    }
    out += [
        ev("response.output_text.done", item_id=item_id, output_index=0, content_index=0, text=text, logprobs=[]),
        ev("response.content_part.done", item_id=item_id, output_index=0, content_index=0, part=part_done),
        ev("response.output_item.done", output_index=0, item=item_done),
        ev("response.completed", response={**resp, "status": "completed", "output": [item_done], "usage": usage}),
    ]
    return out


def _gemini(frags: list[str]) -> list[bytes]:
    out = []
    for i, f in enumerate(frags):
        cand: dict = {"content": {"parts": [{"text": f}], "role": "model"}, "index": 0}
        if i == len(frags) - 1:
            cand["finishReason"] = "STOP"
        usage = {"promptTokenCount": 12, "candidatesTokenCount": i + 1, "totalTokenCount": 13 + i}
        out.append(
            _sse(
                {"candidates": [cand], "usageMetadata": usage, "modelVersion": MODEL, "responseId": "bench"}, eol="\r\n"
            )
        )
    if not frags:
        out.append(
            _sse(
                {
                    "candidates": [
                        {"content": {"parts": [{"text": ""}], "role": "model"}, "finishReason": "STOP", "index": 0}
                    ],
                    "usageMetadata": {"promptTokenCount": 12, "totalTokenCount": 12},
                    "modelVersion": MODEL,
                },
                eol="\r\n",
            )
        )
    return out


BUILDERS: dict[str, Callable[[list[str]], list[bytes]]] = {
    "anthropic": _anthropic,
    "openai-chat": _openai_chat,
    "openai-responses": _openai_responses,
    "gemini": _gemini,
}


def events(dialect: str, n: int, corrupt: str = "") -> list[bytes]:
    """The SSE events of one reply. ``corrupt``: "" | "text" (one fragment altered) | "count" (one
    fragment split in two) | "truncate" (the terminator / last event missing)."""
    frags = fragments(n)
    if corrupt == "text" and frags:
        frags[len(frags) // 2] = frags[len(frags) // 2].upper() + "X"
    elif corrupt == "count" and frags:
        f = frags.pop()
        frags += [f[:1], f[1:]]
    evs = BUILDERS[dialect](frags)
    if corrupt == "truncate":
        evs = evs[:-1]
    return evs


def whole(dialect: str, n: int) -> bytes:
    """The whole (non-streamed) answer of ``n`` fragments as one JSON body in ``dialect``."""
    text = expected_text(n)
    obj: dict
    if dialect == "anthropic":
        obj = {
            "id": "msg_bench",
            "type": "message",
            "role": "assistant",
            "model": MODEL,
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 12, "output_tokens": n},
        }
    elif dialect == "openai-chat":
        obj = {
            "id": "chatcmpl-bench",
            "object": "chat.completion",
            "created": 1700000000,
            "model": MODEL,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text, "refusal": None},
                    "logprobs": None,
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 12, "completion_tokens": n, "total_tokens": 12 + n},
        }
    elif dialect == "openai-responses":
        part = {"type": "output_text", "annotations": [], "logprobs": [], "text": text}
        obj = {
            "id": "resp_bench",
            "object": "response",
            "created_at": 1700000000,
            "status": "completed",
            "model": MODEL,
            "output": [
                {"id": "msg_bench", "type": "message", "status": "completed", "role": "assistant", "content": [part]}
            ],
            "usage": {"input_tokens": 12, "output_tokens": n, "total_tokens": 12 + n},
        }
    else:
        obj = {
            "candidates": [
                {"content": {"parts": [{"text": text}], "role": "model"}, "finishReason": "STOP", "index": 0}
            ],
            "usageMetadata": {"promptTokenCount": 12, "candidatesTokenCount": n, "totalTokenCount": 12 + n},
            "modelVersion": MODEL,
            "responseId": "bench",
        }
    return _j(obj).encode()


_STREAM_RE = re.compile(rb'"stream"\s*:\s*true')


def _chunked(evs: list[bytes]) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in evs) + b"0\r\n\r\n"


def dialect_of(path: str) -> str | None:
    if path.endswith("/messages"):
        return "anthropic"
    if path.endswith("/chat/completions"):
        return "openai-chat"
    if path.endswith("/responses"):
        return "openai-responses"
    if ":streamGenerateContent" in path or ":generateContent" in path:
        return "gemini"
    return None


_CHUNKS_RE = re.compile(rb"chunks(\d+)")
_GAP_RE = re.compile(rb"gap(\d+)")
_CORRUPT_RE = re.compile(rb"corrupt-(text|count|truncate)")
_HEAD_OK = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\ntransfer-encoding: chunked\r\n"
)


class FakeUpstream:
    def __init__(self, chunks: int = DEFAULT_CHUNKS) -> None:
        self.chunks = chunks
        self._cache: dict[tuple[str, int, str], bytes] = {}
        self._whole: dict[tuple[str, int, bool], bytes] = {}
        self.requests = 0
        self.connections = 0  # accepted so far: with keep-alive pooling this stays near the concurrency
        self.open = 0

    def reply(self, dialect: str, n: int, corrupt: str, keep_alive: bool) -> bytes:
        key = (dialect, n, corrupt)
        body = self._cache.get(key)
        if body is None:
            body = self._cache[key] = _chunked(events(dialect, n, corrupt))
        return _HEAD_OK + (b"connection: keep-alive\r\n\r\n" if keep_alive else b"connection: close\r\n\r\n") + body

    def whole_reply(self, dialect: str, n: int, keep_alive: bool) -> bytes:
        key = (dialect, n, keep_alive)
        reply = self._whole.get(key)
        if reply is None:
            body = whole(dialect, n)
            reply = self._whole[key] = (
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n%s\r\n%s"
                % (
                    len(body),
                    b"connection: keep-alive\r\n" if keep_alive else b"connection: close\r\n",
                    body,
                )
            )
        return reply

    async def spread_reply(
        self, writer: asyncio.StreamWriter, dialect: str, n: int, corrupt: str, keep_alive: bool, gap: float
    ) -> None:
        """The same reply, one HTTP chunk per write with ``gap`` seconds between them."""
        writer.write(_HEAD_OK + (b"connection: keep-alive\r\n\r\n" if keep_alive else b"connection: close\r\n\r\n"))
        for ev in events(dialect, n, corrupt):
            writer.write(b"%x\r\n%s\r\n" % (len(ev), ev))
            await writer.drain()
            await asyncio.sleep(gap)
        writer.write(b"0\r\n\r\n")

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.open += 1
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head.split(b"\r\n")
                try:
                    method, target, version = lines[0].split(b" ", 2)
                except ValueError:
                    writer.write(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                    return
                headers: dict[bytes, bytes] = {}
                for line in lines[1:]:
                    if line:
                        name, _, value = line.partition(b":")
                        headers[name.strip().lower()] = value.strip()
                if headers.get(b"transfer-encoding", b"").lower() == b"chunked":
                    body = await _read_chunked(reader)
                else:
                    length = int(headers.get(b"content-length", b"0") or 0)
                    body = await reader.readexactly(length) if length else b""
                keep_alive = headers.get(b"connection", b"").lower() != b"close" and version == b"HTTP/1.1"
                self.requests += 1
                path = target.split(b"?", 1)[0].decode("latin-1")
                dialect = dialect_of(path)
                if method == b"GET" and path == "/stats":
                    stats = json.dumps(
                        {"requests": self.requests, "connections": self.connections, "open": self.open}
                    ).encode()
                    writer.write(
                        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
                        % (len(stats), stats)
                    )
                elif method == b"GET" and path in ("/healthz", "/"):
                    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 2\r\n\r\nok")
                elif method == b"POST" and path in ("/v1/traces", "/v1/metrics", "/v1/logs"):
                    writer.write(
                        b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n"
                    )
                elif method != b"POST" or dialect is None:
                    msg = b'{"error":{"message":"fake upstream: no such endpoint"}}'
                    writer.write(
                        b"HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
                        % (len(msg), msg)
                    )
                else:
                    n = self.chunks
                    if b"x-bench-chunks" in headers:
                        n = int(headers[b"x-bench-chunks"])
                    else:
                        m = _CHUNKS_RE.search(target) or _CHUNKS_RE.search(body)
                        if m:
                            n = int(m.group(1))
                    corrupt = headers.get(b"x-bench-corrupt", b"").decode()
                    if not corrupt:
                        m = _CORRUPT_RE.search(target) or _CORRUPT_RE.search(body)
                        corrupt = m.group(1).decode() if m else ""
                    gap = int(headers.get(b"x-bench-gap-us", b"0"))
                    if not gap:
                        m = _GAP_RE.search(target) or _GAP_RE.search(body)
                        gap = int(m.group(1)) if m else 0
                    streamed = (
                        ":streamGenerateContent" in path if dialect == "gemini" else bool(_STREAM_RE.search(body))
                    )
                    if not streamed and not corrupt:
                        writer.write(self.whole_reply(dialect, n, keep_alive))
                    elif gap:
                        await self.spread_reply(writer, dialect, n, corrupt, keep_alive, gap / 1e6)
                    else:
                        writer.write(self.reply(dialect, n, corrupt, keep_alive))
                await writer.drain()
                if not keep_alive:
                    return
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            return
        finally:
            self.open -= 1
            try:
                writer.close()
            except Exception:
                pass

    async def serve(self, host: str, port: int, started: Callable[[int], None] | None = None) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        server = await asyncio.start_server(self.handle, sock=sock, backlog=2048)
        if started:
            started(sock.getsockname()[1])
        async with server:
            await server.serve_forever()


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    parts = []
    while True:
        size = int((await reader.readline()).split(b";")[0].strip() or b"0", 16)
        if size == 0:
            while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                pass
            return b"".join(parts)
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop

        return uvloop.new_event_loop()
    except ImportError:
        return asyncio.new_event_loop()


class ServerThread:
    """Run the fake in a daemon thread (for tests): ``with ServerThread() as port: ...``."""

    def __init__(self, chunks: int = DEFAULT_CHUNKS, host: str = "127.0.0.1", port: int = 0) -> None:
        self.fake = FakeUpstream(chunks)
        self.host, self.port = host, port
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Future | None = None
        self._thread = threading.Thread(target=self._run, daemon=True, name="fake-upstream")

    def _run(self) -> None:
        loop = self._loop = _new_loop()
        asyncio.set_event_loop(loop)

        def started(port: int) -> None:
            self.port = port
            self._ready.set()

        self._task = loop.create_task(self.fake.serve(self.host, self.port, started))
        try:
            loop.run_until_complete(self._task)
        except (asyncio.CancelledError, Exception):
            pass
        finally:
            loop.close()

    def __enter__(self) -> int:
        self._thread.start()
        if not self._ready.wait(5):
            raise RuntimeError("fake upstream did not start")
        return self.port

    def __exit__(self, *exc: object) -> None:
        if self._loop and self._task:
            self._loop.call_soon_threadsafe(self._task.cancel)
        self._thread.join(5)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=9100)
    ap.add_argument("--chunks", type=int, default=DEFAULT_CHUNKS, help="text fragments per reply (default 50)")
    args = ap.parse_args()
    fake = FakeUpstream(args.chunks)
    loop = _new_loop()
    asyncio.set_event_loop(loop)
    try:
        loop.run_until_complete(
            fake.serve(
                args.host,
                args.port,
                lambda p: print(f"fake upstream on http://{args.host}:{p} ({args.chunks} chunks)", flush=True),
            )
        )
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
