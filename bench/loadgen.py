"""Asyncio load generator: C concurrent streaming requests in one caller dialect, every stream verified.

A stream is counted only if it VERIFIES: HTTP 200, the dialect's terminator seen (Anthropic
``message_stop``; OpenAI chat ``data: [DONE]``; Responses ``response.completed``; Gemini a chunk with
``finishReason`` and then a clean end of the body), no in-stream error, the concatenated text equal
to ``fake_upstream.expected_text(N)`` and exactly N non-empty text fragments. Anything else is an
error, with a reason.

The HTTP client is a small raw-asyncio HTTP/1.1 client with one keep-alive connection per worker,
so that the load generator spends little CPU per stream (httpx costs several times more).

    python bench/loadgen.py --url http://127.0.0.1:8080 --dialect anthropic --model bench-anthropic \\
        -c 16 -d 5 [--chunks 50] [-n REQUESTS] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fake_upstream import DEFAULT_CHUNKS, expected_text

DIALECTS = ("anthropic", "openai-chat", "openai-responses", "gemini")
PROMPT = "Say something for the benchmark."


# ---------------------------------------------------------------------------------------------
# requests per caller dialect


def build_request(
    dialect: str, model: str, base_path: str = "", stream: bool = True
) -> tuple[str, dict[str, str], bytes]:
    """(path, headers, body) of a streaming request in ``dialect`` (``stream=False``: a whole one,
    a Responses one with ``store: false``). ``base_path`` is the URL's path prefix."""
    if not stream:
        return _whole_request(dialect, model, base_path)
    if dialect == "anthropic":
        body = {"model": model, "max_tokens": 1024, "stream": True, "messages": [{"role": "user", "content": PROMPT}]}
        return (
            base_path + "/v1/messages",
            {"x-api-key": "bench", "anthropic-version": "2023-06-01"},
            json.dumps(body).encode(),
        )
    if dialect == "openai-chat":
        body = {
            "model": model,
            "stream": True,
            "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": PROMPT}],
        }
        return base_path + "/v1/chat/completions", {"authorization": "Bearer bench"}, json.dumps(body).encode()
    if dialect == "openai-responses":
        body = {"model": model, "stream": True, "input": PROMPT}
        return base_path + "/v1/responses", {"authorization": "Bearer bench"}, json.dumps(body).encode()
    if dialect == "gemini":
        body = {"contents": [{"role": "user", "parts": [{"text": PROMPT}]}]}
        return (
            f"{base_path}/v1beta/models/{model}:streamGenerateContent?alt=sse",
            {"x-goog-api-key": "bench"},
            json.dumps(body).encode(),
        )
    raise ValueError(f"unknown dialect {dialect!r}")


def _whole_request(dialect: str, model: str, base_path: str) -> tuple[str, dict[str, str], bytes]:
    if dialect == "anthropic":
        body: dict = {"model": model, "max_tokens": 1024, "messages": [{"role": "user", "content": PROMPT}]}
        return (
            base_path + "/v1/messages",
            {"x-api-key": "bench", "anthropic-version": "2023-06-01"},
            json.dumps(body).encode(),
        )
    if dialect == "openai-chat":
        body = {"model": model, "messages": [{"role": "user", "content": PROMPT}]}
        return base_path + "/v1/chat/completions", {"authorization": "Bearer bench"}, json.dumps(body).encode()
    if dialect == "openai-responses":  # not stored: the store's cost is its own feature (bench/README.md)
        body = {"model": model, "input": PROMPT, "store": False}
        return base_path + "/v1/responses", {"authorization": "Bearer bench"}, json.dumps(body).encode()
    if dialect == "gemini":
        body = {"contents": [{"role": "user", "parts": [{"text": PROMPT}]}]}
        return (
            f"{base_path}/v1beta/models/{model}:generateContent",
            {"x-goog-api-key": "bench"},
            json.dumps(body).encode(),
        )
    raise ValueError(f"unknown dialect {dialect!r}")


def whole_text(dialect: str, obj: object) -> str | None:
    """The answer's text in a whole response body of ``dialect``, or None when it has none."""
    if not isinstance(obj, dict):
        return None
    try:
        if dialect == "anthropic":
            return "".join(b["text"] for b in obj["content"] if b.get("type") == "text")
        if dialect == "openai-chat":
            return obj["choices"][0]["message"]["content"]
        if dialect == "openai-responses":
            return "".join(
                p["text"]
                for item in obj["output"]
                if item.get("type") == "message"
                for p in item["content"]
                if p.get("type") == "output_text"
            )
        if dialect == "gemini":
            return "".join(p.get("text", "") for p in obj["candidates"][0]["content"]["parts"] if not p.get("thought"))
    except (KeyError, IndexError, TypeError):
        return None
    return None


def verify_whole(dialect: str, status: int, body: bytes, chunks: int, body_complete: bool = True) -> Verdict:
    """Check one whole (non-streamed) answer: HTTP 200, a JSON object, the exact text."""
    if status != 200:
        return Verdict(False, f"HTTP {status}: {body[:200]!r}")
    if not body_complete:
        return Verdict(False, "body not cleanly ended")
    try:
        obj = json.loads(body)
    except ValueError:
        return Verdict(False, f"not JSON: {body[:80]!r}")
    text = whole_text(dialect, obj)
    if text is None:
        return Verdict(False, f"no answer text in {body[:200]!r}")
    if text != expected_text(chunks):
        return Verdict(False, f"text mismatch (len {len(text)} vs {len(expected_text(chunks))})", text)
    return Verdict(True, "", text, 1)


# ---------------------------------------------------------------------------------------------
# parsing and verifying a stream

_EOL = re.compile(r"\r\n|\r|\n")


def parse_sse(text: str) -> tuple[list[tuple[str | None, str]], bool]:
    """Frames (event, data) of a whole SSE body, and whether it ended cleanly on a blank line.
    Independent of gateway/framing/sse.py on purpose (a second, simple implementation)."""
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = _EOL.split(text)
    tail = lines.pop()
    frames: list[tuple[str | None, str]] = []
    event: str | None = None
    data: list[str] | None = None
    pending = False
    for line in lines:
        if not line:
            if data is not None:
                frames.append((event, "\n".join(data)))
            event, data, pending = None, None, False
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        pending = True
        if name == "data":
            (data := data if data is not None else []).append(value)
        elif name == "event":
            event = value
    return frames, not pending and (not tail or tail.startswith(":"))


@dataclass
class Verdict:
    ok: bool
    reason: str = ""
    text: str = ""
    fragments: int = 0


def extract(dialect: str, frames: list[tuple[str | None, str]]) -> tuple[list[str], bool, str]:
    """(text fragments, terminator seen, error) from a caller-dialect stream."""
    frags: list[str] = []
    done = False
    error = ""
    for i, (event, data) in enumerate(frames):
        if done and dialect != "openai-chat":
            if dialect == "anthropic" and event == "ping":
                continue
            return frags, False, f"frame after the terminator: {data[:80]}"
        if dialect == "openai-chat" and data == "[DONE]":
            if done:
                return frags, False, "two [DONE]"
            done = True
            continue
        if dialect == "openai-chat" and done:
            return frags, False, "frame after [DONE]"
        try:
            obj = json.loads(data)
        except ValueError:
            return frags, False, f"frame {i} is not JSON: {data[:80]!r}"
        if not isinstance(obj, dict):
            return frags, False, f"frame {i} is not an object"
        if dialect == "anthropic":
            kind = obj.get("type")
            if kind == "content_block_delta" and obj.get("delta", {}).get("type") == "text_delta":
                t = obj["delta"].get("text", "")
                if t:
                    frags.append(t)
            elif kind == "message_stop":
                done = True
            elif kind == "error" or event == "error":
                error = f"error event: {data[:200]}"
        elif dialect == "openai-chat":
            if "error" in obj:
                error = f"error chunk: {data[:200]}"
            for choice in obj.get("choices") or []:
                t = (choice.get("delta") or {}).get("content")
                if t:
                    frags.append(t)
        elif dialect == "openai-responses":
            kind = obj.get("type")
            if kind == "response.output_text.delta":
                t = obj.get("delta", "")
                if t:
                    frags.append(t)
            elif kind == "response.completed":
                done = True
            elif kind in ("error", "response.failed", "response.incomplete"):
                error = f"{kind}: {data[:200]}"
        elif dialect == "gemini":
            if "error" in obj:
                error = f"error object: {data[:200]}"
            cands = obj.get("candidates") or []
            if cands:
                for part in (cands[0].get("content") or {}).get("parts") or []:
                    t = part.get("text")
                    if t and not part.get("thought"):
                        frags.append(t)
                if cands[0].get("finishReason"):
                    done = True
        if error:
            return frags, False, error
    return frags, done, error


def verify(dialect: str, status: int, body: bytes, chunks: int, body_complete: bool = True) -> Verdict:
    """Check one whole response body. ``body_complete``: the HTTP body ended properly (final chunk /
    content-length reached), which is Gemini's only end-of-stream signal."""
    if status != 200:
        return Verdict(False, f"HTTP {status}: {body[:200]!r}")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Verdict(False, f"invalid UTF-8: {exc}")
    frames, clean = parse_sse(text)
    frags, done, error = extract(dialect, frames)
    got = "".join(frags)
    v = Verdict(False, "", got, len(frags))
    if error:
        v.reason = error
    elif not done:
        v.reason = "no terminator"
    elif not clean or not body_complete:
        v.reason = "body not cleanly ended"
    elif got != expected_text(chunks):
        exp = expected_text(chunks)
        at = next((i for i, (a, b) in enumerate(zip(got, exp)) if a != b), min(len(got), len(exp)))
        v.reason = f"text mismatch at char {at}: got {got[at : at + 20]!r}, want {exp[at : at + 20]!r} (len {len(got)} vs {len(exp)})"
    elif len(frags) != chunks:
        v.reason = f"fragment count {len(frags)} != {chunks}"
    else:
        v.ok = True
    return v


# ---------------------------------------------------------------------------------------------
# a minimal HTTP/1.1 client


class Conn:
    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def close(self) -> None:
        if self.writer:
            self.writer.close()
            try:
                await self.writer.wait_closed()
            except Exception:
                pass
        self.reader = self.writer = None

    async def request(
        self, path: str, headers: dict[str, str], body: bytes, timeout: float
    ) -> tuple[int, bytes, float, bool]:
        """POST; returns (status, body, seconds to the first body byte, body ended properly)."""
        t0 = time.perf_counter()
        for attempt in (0, 1):
            reused = self.writer is not None
            if not reused:
                self.reader, self.writer = await asyncio.open_connection(self.host, self.port, limit=1 << 20)
            head = f"POST {path} HTTP/1.1\r\nhost: {self.host}:{self.port}\r\ncontent-type: application/json\r\naccept: text/event-stream\r\ncontent-length: {len(body)}\r\n"
            head += "".join(f"{k}: {v}\r\n" for k, v in headers.items())
            assert self.writer and self.reader
            self.writer.write(head.encode() + b"\r\n" + body)
            try:
                status_line = await asyncio.wait_for(self.reader.readline(), timeout)
                if not status_line:
                    raise ConnectionResetError("closed before the status line")
            except (ConnectionError, asyncio.IncompleteReadError):
                await self.close()
                if reused and attempt == 0:  # a stale keep-alive connection: retry once on a fresh one
                    t0 = time.perf_counter()
                    continue
                raise
            break
        return await asyncio.wait_for(self._response(status_line, t0), timeout)

    async def _response(self, status_line: bytes, t0: float) -> tuple[int, bytes, float, bool]:
        assert self.reader
        status = int(status_line.split(b" ", 2)[1])
        hdrs: dict[bytes, bytes] = {}
        while True:
            line = await self.reader.readline()
            if line in (b"\r\n", b"\n", b""):
                break
            k, _, v = line.partition(b":")
            hdrs[k.strip().lower()] = v.strip()
        ttfb = 0.0
        parts: list[bytes] = []
        complete = True
        if hdrs.get(b"transfer-encoding", b"").lower() == b"chunked":
            while True:
                size_line = await self.reader.readline()
                if not size_line:
                    complete = False
                    break
                size = int(size_line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while (await self.reader.readline()) not in (b"\r\n", b"\n", b""):
                        pass
                    break
                try:
                    data = await self.reader.readexactly(size)
                    await self.reader.readexactly(2)
                except asyncio.IncompleteReadError as exc:
                    parts.append(exc.partial)
                    complete = False
                    break
                if not ttfb:
                    ttfb = time.perf_counter() - t0
                parts.append(data)
        elif b"content-length" in hdrs:
            n = int(hdrs[b"content-length"])
            try:
                data = await self.reader.readexactly(n)
            except asyncio.IncompleteReadError as exc:
                data, complete = exc.partial, False
            ttfb = time.perf_counter() - t0
            parts.append(data)
        else:  # until close
            while chunk := await self.reader.read(65536):
                if not ttfb:
                    ttfb = time.perf_counter() - t0
                parts.append(chunk)
            await self.close()
        if not complete or hdrs.get(b"connection", b"").lower() == b"close":
            await self.close()
        return status, b"".join(parts), ttfb or (time.perf_counter() - t0), complete


# ---------------------------------------------------------------------------------------------
# the load loop


@dataclass
class Result:
    dialect: str
    concurrency: int
    chunks: int
    seconds: float = 0.0
    verified: int = 0
    errors: int = 0
    ttfb: list[float] = field(default_factory=list)
    error_samples: dict[str, int] = field(default_factory=dict)

    @property
    def streams_per_s(self) -> float:
        return self.verified / self.seconds if self.seconds else 0.0

    def pct(self, q: float) -> float:
        """TTFB percentile in milliseconds (nearest rank)."""
        if not self.ttfb:
            return float("nan")
        s = sorted(self.ttfb)
        return 1000 * s[min(len(s) - 1, max(0, round(q / 100 * len(s) + 0.5) - 1))]

    def summary(self) -> dict:
        return {
            "dialect": self.dialect,
            "concurrency": self.concurrency,
            "chunks": self.chunks,
            "seconds": round(self.seconds, 3),
            "verified": self.verified,
            "errors": self.errors,
            "streams_per_s": round(self.streams_per_s, 1),
            "ttfb_p50_ms": round(self.pct(50), 3),
            "ttfb_p99_ms": round(self.pct(99), 3),
            "error_samples": self.error_samples,
        }


async def run_load(
    url: str,
    dialect: str,
    model: str,
    concurrency: int = 1,
    duration: float | None = None,
    requests: int | None = None,
    chunks: int = DEFAULT_CHUNKS,
    timeout: float = 30.0,
    extra_headers: dict[str, str] | None = None,
    stream: bool = True,
) -> Result:
    """Open ``concurrency`` workers streaming until ``duration`` seconds passed or ``requests`` were sent.
    ``stream=False``: whole requests (``verify_whole``); ``ttfb`` is then each request's whole latency."""
    if duration is None and requests is None:
        raise ValueError("give a duration or a request count")
    u = urlsplit(url)
    host, port = u.hostname or "127.0.0.1", u.port or 80
    path, headers, body = build_request(dialect, model, u.path.rstrip("/"), stream)
    check = verify if stream else verify_whole
    headers = {**headers, "x-bench-chunks": str(chunks), **(extra_headers or {})}
    res = Result(dialect, concurrency, chunks)
    remaining = [requests if requests is not None else 1 << 62]
    t_start = time.perf_counter()
    deadline = t_start + duration if duration is not None else float("inf")

    async def worker() -> None:
        conn = Conn(host, port)
        try:
            while remaining[0] > 0 and time.perf_counter() < deadline:
                remaining[0] -= 1
                try:
                    status, data, ttfb, complete = await conn.request(path, headers, body, timeout)
                    v = check(dialect, status, data, chunks, complete)
                except (TimeoutError, OSError, asyncio.IncompleteReadError, ValueError) as exc:
                    await conn.close()
                    v = Verdict(False, f"{type(exc).__name__}: {exc}")
                    ttfb = 0.0
                if v.ok:
                    res.verified += 1
                    res.ttfb.append(ttfb)
                else:
                    res.errors += 1
                    key = v.reason[:160]
                    res.error_samples[key] = res.error_samples.get(key, 0) + 1
        finally:
            await conn.close()

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    res.seconds = time.perf_counter() - t_start
    return res


def new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop

        return uvloop.new_event_loop()
    except ImportError:
        return asyncio.new_event_loop()


def main() -> int:
    ap = argparse.ArgumentParser(description="Streaming load generator with per-stream verification.")
    ap.add_argument(
        "--url", required=True, help="base URL of the gateway or the fake upstream, e.g. http://127.0.0.1:8080"
    )
    ap.add_argument("--dialect", required=True, choices=DIALECTS, help="caller dialect")
    ap.add_argument(
        "--model", default=None, help="model name to send (default bench-<dialect>, or bench-chunks<N> with --direct)"
    )
    ap.add_argument("-c", "--concurrency", type=int, default=1)
    ap.add_argument("-d", "--duration", type=float, default=None, help="seconds (default 5 unless -n is given)")
    ap.add_argument("-n", "--requests", type=int, default=None)
    ap.add_argument(
        "--chunks", type=int, default=DEFAULT_CHUNKS, help="text fragments the upstream sends (must match the fake's)"
    )
    ap.add_argument("--timeout", type=float, default=30.0)
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    args = ap.parse_args()
    model = args.model or f"bench-{args.dialect}"
    duration = args.duration if args.duration is not None or args.requests is not None else 5.0
    loop = new_loop()
    res = loop.run_until_complete(
        run_load(args.url, args.dialect, model, args.concurrency, duration, args.requests, args.chunks, args.timeout)
    )
    loop.close()
    s = res.summary()
    if args.json:
        print(json.dumps(s))
    else:
        print(
            f"{s['dialect']} c={s['concurrency']} chunks={s['chunks']}: {s['verified']} verified streams in {s['seconds']} s = "
            f"{s['streams_per_s']} streams/s; TTFB p50 {s['ttfb_p50_ms']} ms p99 {s['ttfb_p99_ms']} ms; errors {s['errors']}"
        )
        for reason, count in s["error_samples"].items():
            print(f"  {count} x {reason}")
    return 0 if res.errors == 0 and res.verified > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
