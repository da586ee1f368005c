"""A loopback double of Bedrock runtime: InvokeModel / InvokeModelWithResponseStream for Claude.

A real HTTP server on 127.0.0.1 (run it with ``ServerThread``). It replays the repo's Anthropic
captures (``captures/anthropic/<scenario>.sse``) as Bedrock sends them: a stream is AWS
eventstream messages, each a ``chunk`` whose payload is ``{"bytes": base64(event), "p": padding}``;
a whole reply is the assembled Anthropic message as JSON.

It checks auth for real. A SigV4 request is verified by recomputing the signature with botocore
from the double's own credentials (the signed headers, the request's ``x-amz-date``, the body as
received); a wrong one gets Bedrock's own 403 (``InvalidSignatureException``), an unknown key id
``UnrecognizedClientException``. ``api_key``: ``Authorization: Bearer <key>`` is accepted instead.

The scenario is the model id's part after ``--`` (``…v1:0--tool_call``; default ``text``).
Extra scenarios: ``throttle`` (always HTTP 429 ``ThrottlingException``), ``throttle_once`` (429 the
first time per model, then ``text``), ``frame_throttle_once`` (a ``throttlingException`` frame
after the 200, before any content, once; then ``text``), ``exception_mid`` (half the ``text``
stream, then a ``modelStreamErrorException`` frame), ``bad_crc`` (a chunk with a broken CRC).
``error_mid_stream`` turns the capture's Anthropic ``error`` event into the exception frame
Bedrock would send. Converse (``/converse``, ``/converse-stream``): ``converse_handler``
(``ConverseReplay`` replays the bedrock-converse dialect's fixtures, streamed or folded into one
JSON reply; 404 until set).
"""

from __future__ import annotations

import base64
import struct
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import orjson

from gateway.framing.sse import SSEDecoder

CAPTURES = Path(__file__).resolve().parents[2] / "captures" / "anthropic"

ACCESS_KEY = "AKIDEXAMPLEGATEWAY01"
SECRET_KEY = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYSECRETKEY99"
SESSION_TOKEN = "FwoGZXIvYXdzSESSIONTOKEN//////////wEaDTestTokenValue0123456789"
API_KEY = "ABSKbedrock-api-key-secret-0123456789"

BAD_SIGNATURE = (
    "The request signature we calculated does not match the signature you provided. "
    "Check your AWS Secret Access Key and signing method. Consult the service documentation for details."
)


# --------------------------------------------------------------------------- eventstream encoding


def encode_header(name: str, value: bool | int | bytes | str, kind: int | None = None) -> bytes:
    """One header; ``kind`` picks the integer width (2 byte, 3 short, 4 int, 5 long, 8 timestamp) or 9 uuid."""
    raw = name.encode()
    out = bytes([len(raw)]) + raw
    if isinstance(value, bool):
        return out + bytes([0 if value else 1])
    if isinstance(value, int):
        kind = kind or 4
        fmt = {2: ">b", 3: ">h", 4: ">i", 5: ">q", 8: ">q"}[kind]
        return out + bytes([kind]) + struct.pack(fmt, value)
    if isinstance(value, bytes) and kind == 9:
        return out + b"\x09" + value
    blob = value.encode() if isinstance(value, str) else value
    return out + bytes([7 if isinstance(value, str) else 6]) + struct.pack(">H", len(blob)) + blob


def encode_message(headers: dict[str, str] | bytes, payload: bytes) -> bytes:
    """One eventstream message (string headers, or a pre-encoded header block)."""
    block = headers if isinstance(headers, bytes) else b"".join(encode_header(k, v) for k, v in headers.items())
    total = 16 + len(block) + len(payload)
    prelude = struct.pack(">II", total, len(block))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    body = prelude + block + payload
    return body + struct.pack(">I", zlib.crc32(body))


def event_message(event_type: str, payload: bytes) -> bytes:
    return encode_message(
        {":event-type": event_type, ":content-type": "application/json", ":message-type": "event"}, payload
    )


def chunk_message(anthropic_event: bytes, padding: str = "abcdefghijklmnop") -> bytes:
    """Bedrock's ``chunk``: the Anthropic event base64'd, plus its random-length ``p`` padding."""
    return event_message(
        "chunk",
        orjson.dumps({"bytes": base64.b64encode(anthropic_event).decode(), "p": padding[: len(anthropic_event) % 16]}),
    )


def exception_message(exception_type: str, message: str) -> bytes:
    headers = {":exception-type": exception_type, ":content-type": "application/json", ":message-type": "exception"}
    return encode_message(headers, orjson.dumps({"message": message}))


# --------------------------------------------------------------------------- captures


def anthropic_events(scenario: str) -> list[bytes]:
    """The capture's event JSONs (``data`` of each SSE frame), in order."""
    decoder = SSEDecoder()
    frames = decoder.feed((CAPTURES / f"{scenario}.sse").read_bytes())
    return [f.data.encode() for f in frames]


def assemble(events: list[bytes]) -> dict[str, Any]:
    """The whole Anthropic message the events of a stream add up to (InvokeModel's reply)."""
    message: dict[str, Any] = {}
    partial: dict[int, str] = {}
    for raw in events:
        e = orjson.loads(raw)
        t = e.get("type")
        if t == "message_start":
            message = dict(e["message"])
            message["content"] = []
        elif t == "content_block_start":
            message["content"].append(dict(e["content_block"]))
        elif t == "content_block_delta":
            block, delta = message["content"][e["index"]], e["delta"]
            if delta["type"] == "text_delta":
                block["text"] = block.get("text", "") + delta["text"]
            elif delta["type"] == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + delta["thinking"]
            elif delta["type"] == "signature_delta":
                block["signature"] = block.get("signature", "") + delta["signature"]
            elif delta["type"] == "input_json_delta":
                partial[e["index"]] = partial.get(e["index"], "") + delta["partial_json"]
        elif t == "content_block_stop" and e["index"] in partial:
            message["content"][e["index"]]["input"] = orjson.loads(partial.pop(e["index"]) or "{}")
        elif t == "message_delta":
            message.update(e.get("delta", {}))
            message["usage"] = {**message.get("usage", {}), **e.get("usage", {})}
    return message


# --------------------------------------------------------------------------- the server


@dataclass
class Seen:
    path: str  # as received, percent-encoding kept
    model: str  # the model id, decoded
    headers: dict[str, str]
    body: dict[str, Any]
    auth: str  # "sigv4" | "bearer" | "refused:<why>"


Send = Callable[[dict[str, Any]], Awaitable[None]]


@dataclass
class BedrockDouble:
    region: str = "us-east-1"
    access_key: str = ACCESS_KEY
    secret_key: str = SECRET_KEY
    session_token: str | None = SESSION_TOKEN
    api_key: str | None = API_KEY
    seen: list[Seen] = field(default_factory=list)
    hits: dict[str, int] = field(default_factory=dict)
    converse_handler: Callable[[dict[str, Any], str, bool, Send], Awaitable[None]] | None = None
    # InvokeModel of a model other than Claude (embedding models: tests/support/embed_double.py)
    invoke_handler: Callable[[dict[str, Any], str, Send], Awaitable[None]] | None = None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                await send({"type": message["type"] + ".complete"})
                if message["type"] == "lifespan.shutdown":
                    return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        raw_path = scope.get("raw_path") or scope["path"].encode()
        path = raw_path.decode("latin-1")
        parts = path.split("/")
        if len(parts) != 4 or parts[1] != "model":
            await _json(send, 404, {"message": f"no such operation: {path}"}, "UnknownOperationException")
            return
        model, action = unquote(parts[2]), parts[3]
        refused = self._refuse(scope["method"], path, scope.get("query_string", b""), headers, body)
        parsed = orjson.loads(body) if body else {}
        self.seen.append(
            Seen(
                path,
                model,
                headers,
                parsed,
                "refused:" + refused[1]
                if refused
                else ("bearer" if headers.get("authorization", "").startswith("Bearer ") else "sigv4"),
            )
        )
        if refused:
            await _json(send, 403, {"message": refused[1]}, refused[0])
            return
        if action in ("converse", "converse-stream"):
            if self.converse_handler is None:
                await _json(
                    send,
                    404,
                    {"message": "converse is not served by this double (set converse_handler)"},
                    "ResourceNotFoundException",
                )
                return
            await self.converse_handler(parsed, model, action == "converse-stream", send)
            return
        if action not in ("invoke", "invoke-with-response-stream"):
            await _json(send, 404, {"message": f"unknown action {action}"}, "UnknownOperationException")
            return
        # InvokeModel's Content-Type / Accept name the body's and the answer's MIME types (Claude:
        # JSON only); Bedrock refuses others (github.com/aws/aws-sdk-ruby/issues/3033).
        if headers.get("content-type", "application/json").split(";")[0].strip() != "application/json":
            await _json(
                send,
                400,
                {"message": "The provided Content Type is invalid or not supported for this model"},
                "ValidationException",
            )
            return
        if action == "invoke" and headers.get("accept", "application/json") not in ("application/json", "*/*"):
            await _json(
                send,
                400,
                {"message": "The provided Accept Type is invalid or not supported for this model"},
                "ValidationException",
            )
            return
        if self.invoke_handler is not None and action == "invoke" and "claude" not in model:
            await self.invoke_handler(parsed, model, send)
            return
        await self._invoke(model, action == "invoke-with-response-stream", send)

    # -- auth --------------------------------------------------------------------------------

    def _refuse(
        self, method: str, path: str, query: bytes, headers: dict[str, str], body: bytes
    ) -> tuple[str, str] | None:
        """(error type, message) Bedrock would refuse this request's credentials with, or None."""
        authorization = headers.get("authorization", "")
        if authorization.startswith("Bearer "):
            if self.api_key is not None and authorization[7:] == self.api_key:
                return None
            return "UnrecognizedClientException", "Invalid API Key format: Must start with pre-defined prefix"
        if not authorization.startswith("AWS4-HMAC-SHA256 "):
            return "MissingAuthenticationTokenException", "Missing Authentication Token"
        fields = dict(part.strip().split("=", 1) for part in authorization[17:].split(","))
        key_id, _date, region, service, _ = fields["Credential"].split("/")
        if key_id != self.access_key:
            return "UnrecognizedClientException", "The security token included in the request is invalid."
        if self.session_token is not None and headers.get("x-amz-security-token") != self.session_token:
            return "UnrecognizedClientException", "The security token included in the request is invalid."
        if region != self.region or service != "bedrock":
            return (
                "InvalidSignatureException",
                f"Credential should be scoped to a valid region / service ({region}/{service})",
            )
        from botocore.auth import SigV4Auth  # type: ignore[import-untyped]
        from botocore.awsrequest import AWSRequest  # type: ignore[import-untyped]
        from botocore.credentials import Credentials  # type: ignore[import-untyped]

        signed = fields["SignedHeaders"].split(";")
        if "host" not in signed or "x-amz-date" not in signed:
            return "InvalidSignatureException", "Signed headers must include host and x-amz-date"
        url = f"http://{headers['host']}{path}" + (f"?{query.decode()}" if query else "")
        request = AWSRequest(
            method=method, url=url, data=body, headers={name: headers.get(name, "") for name in signed}
        )
        request.context["timestamp"] = headers["x-amz-date"]
        signer = SigV4Auth(Credentials(self.access_key, self.secret_key, self.session_token), "bedrock", self.region)
        expected = signer.signature(signer.string_to_sign(request, signer.canonical_request(request)), request)
        if expected != fields["Signature"]:
            return "InvalidSignatureException", BAD_SIGNATURE
        return None

    # -- answers -----------------------------------------------------------------------------

    async def _invoke(self, model: str, stream: bool, send: Send) -> None:
        scenario = model.rsplit("--", 1)[1] if "--" in model else "text"
        self.hits[model] = self.hits.get(model, 0) + 1
        first = self.hits[model] == 1
        if scenario == "throttle" or (scenario == "throttle_once" and first):
            await _json(
                send, 429, {"message": "Too many requests, please wait before trying again."}, "ThrottlingException"
            )
            return
        events = anthropic_events(scenario if scenario in _CAPTURED else "text")
        if not stream:
            await _json(send, 200, assemble(events))
            return
        messages = [chunk_message(e) for e in events if b'"type":"error"' not in e and b'"type": "error"' not in e]
        if scenario == "error_mid_stream":
            error = orjson.loads(next(e for e in events if b'"error"' in e and b'"type":"error"' in e))
            messages.append(exception_message("modelStreamErrorException", error["error"]["message"]))
        elif scenario == "exception_mid":
            messages = messages[: len(messages) // 2] + [
                exception_message("modelStreamErrorException", "The model failed mid-stream.")
            ]
        elif scenario == "frame_throttle_once" and first:
            messages = [exception_message("throttlingException", "Too many tokens, please wait before trying again.")]
        elif scenario == "bad_crc":
            broken = bytearray(messages[2])
            broken[-6] ^= 0x01  # a payload byte: the message CRC no longer matches
            messages[2] = bytes(broken)
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"application/vnd.amazon.eventstream"),
                    (b"x-amzn-requestid", b"double-0001"),
                ],
            }
        )
        data = b"".join(messages)
        step = max(1, len(data) // 7)  # odd-sized writes: messages split across reads
        for i in range(0, len(data), step):
            await send({"type": "http.response.body", "body": data[i : i + step], "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


_CAPTURED = {p.stem for p in CAPTURES.glob("*.sse")}


async def _json(send: Send, status: int, body: Any, error_type: str | None = None) -> None:
    headers = [(b"content-type", b"application/json"), (b"x-amzn-requestid", b"double-0001")]
    if error_type is not None:
        headers.append(
            (b"x-amzn-errortype", f"{error_type}:http://internal.amazon.com/coral/com.amazon.bedrock/".encode())
        )
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": orjson.dumps(body)})


# exception type of a stream -> (HTTP status, x-amzn-ErrorType) of the same failure in a whole reply
WHOLE_ERRORS = {
    "throttlingException": (429, "ThrottlingException"),
    "modelStreamErrorException": (424, "ModelErrorException"),
    "internalServerException": (500, "InternalServerException"),
    "serviceUnavailableException": (503, "ServiceUnavailableException"),
    "validationException": (400, "ValidationException"),
}


def fold_converse(frames: list[list[Any]]) -> tuple[int, dict[str, Any], str | None]:
    """(status, body, error type) of the ``/converse`` reply a ConverseStream's frames add up to;
    a stream that fails (an exception message) is that exception as an HTTP error."""
    blocks: dict[tuple[int, str], dict[str, Any]] = {}  # (contentBlockIndex, kind): a block of each kind per index
    tool_json: dict[tuple[int, str], str] = {}
    reply: dict[str, Any] = {"output": {"message": {"role": "assistant", "content": []}}}
    for event, payload in frames:
        if event.endswith("Exception"):
            status, error_type = WHOLE_ERRORS.get(event, (500, "InternalServerException"))
            return status, {"message": payload.get("message", event)}, error_type
        index = payload.get("contentBlockIndex", 0)
        if event == "contentBlockStart" and "toolUse" in payload.get("start", {}):
            start = payload["start"]["toolUse"]
            blocks[index, "toolUse"] = {"toolUse": {"toolUseId": start["toolUseId"], "name": start["name"]}}
            tool_json[index, "toolUse"] = ""
        elif event == "contentBlockDelta":
            delta = payload["delta"]
            if "text" in delta:
                block = blocks.setdefault((index, "text"), {"text": ""})
                block["text"] += delta["text"]
            elif "toolUse" in delta:
                tool_json[index, "toolUse"] += delta["toolUse"]["input"]
            elif "reasoningContent" in delta:
                part = delta["reasoningContent"]
                if "redactedContent" in part:
                    blocks[index, "reasoning"] = {"reasoningContent": {"redactedContent": part["redactedContent"]}}
                else:
                    text = blocks.setdefault(
                        (index, "reasoning"), {"reasoningContent": {"reasoningText": {"text": ""}}}
                    )["reasoningContent"]["reasoningText"]
                    text["text"] += part.get("text", "")
                    if "signature" in part:
                        text["signature"] = part["signature"]
        elif event == "messageStop":
            reply["stopReason"] = payload["stopReason"]
            if "additionalModelResponseFields" in payload:
                reply["additionalModelResponseFields"] = payload["additionalModelResponseFields"]
        elif event == "metadata":
            reply["usage"], reply["metrics"] = payload["usage"], payload.get("metrics", {"latencyMs": 1})
    for key, raw in tool_json.items():
        blocks[key]["toolUse"]["input"] = orjson.loads(raw or "{}")
    reply["output"]["message"]["content"] = [blocks[key] for key in sorted(blocks)]
    return 200, reply, None


class ConverseReplay:
    """A ``converse_handler`` replaying the bedrock-converse dialect's fixtures
    (``{"frames": [[event, payload], …]}``): ``/converse-stream`` as eventstream messages (an
    ``…Exception`` event is an exception message), ``/converse`` as the JSON reply the same frames
    add up to (``fold_converse``); a fixture without frames (``whole.*.json``) is a whole reply.

    Extra scenarios, counted per model in ``hits``: ``throttle_once`` (HTTP 429 the first time,
    then ``text``), ``frame_throttle_once`` (a stream: a ``throttlingException`` message after
    the 200, before any content, once; then ``text``). ``bodies`` keeps every request body."""

    def __init__(self, fixtures: Path) -> None:
        self.fixtures = fixtures
        self.hits: dict[str, int] = {}
        self.bodies: list[dict[str, Any]] = []

    async def __call__(self, body: dict[str, Any], model: str, stream: bool, send: Send) -> None:
        scenario = model.rsplit("--", 1)[1] if "--" in model else "text"
        self.bodies.append(body)
        self.hits[model] = self.hits.get(model, 0) + 1
        first = self.hits[model] == 1
        if scenario in ("throttle_once", "frame_throttle_once"):
            if first and (scenario == "throttle_once" or not stream):
                await _json(
                    send, 429, {"message": "Too many requests, please wait before trying again."}, "ThrottlingException"
                )
                return
            scenario = "throttled" if first else "text"  # (throttled.json: the exception message after the 200)
        fixture = orjson.loads((self.fixtures / f"{scenario}.json").read_bytes())
        if "frames" not in fixture:
            await _json(send, 200, fixture)
            return
        frames = fixture["frames"]
        if not stream:
            status, reply, error_type = fold_converse(frames)
            await _json(send, status, reply, error_type)
            return
        data = b"".join(
            encode_message(
                {":exception-type": event, ":content-type": "application/json", ":message-type": "exception"},
                orjson.dumps(payload),
            )
            if event.endswith("Exception")
            else event_message(event, orjson.dumps(payload))
            for event, payload in frames
        )
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/vnd.amazon.eventstream")],
            }
        )
        step = max(1, len(data) // 5)  # odd-sized writes: messages split across reads
        for i in range(0, len(data), step):
            await send({"type": "http.response.body", "body": data[i : i + step], "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})
