"""The same-dialect fast path forwards the upstream's frames; only the model name may change.

The property: for every capture of ``captures/`` and ``../shared/captures-public`` (skipped when
absent), with the upstream reporting a model named after ANY key, string value or stop reason that
occurs in those streams (``text``, ``length``, ``message``, ``end_turn``, ``candidates`` …), the
stream a caller of the same dialect gets, parsed, equals the upstream's parsed frames with the
model set to the caller's name at the places the dialect puts it — and nowhere else. The places
are written out here from the dialects' documentation, independently of the codecs' own rules.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.dialects.base import EncodeContext
from gateway.dialects.registry import codec_for
from gateway.events import End, StreamError
from gateway.framing.sse import SSEDecoder, SSEFrame, encode_frame
from gateway.ir import ChatRequest
from gateway.relay.fast_path import FramePassthrough

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = [ROOT / "captures", ROOT.parent / "shared" / "captures-public"]
DIALECTS = ["anthropic", "openai-chat", "openai-responses", "gemini", "gemini-interactions"]

# (parent key or None, key): where each dialect's stream frames name the model.
PLACES: dict[str, tuple[str | None, str]] = {
    "anthropic": ("message", "model"),  # message_start.message.model
    "openai-chat": (None, "model"),  # every chunk
    "openai-responses": ("response", "model"),  # response.created / in_progress / completed …
    "gemini": (None, "modelVersion"),  # every chunk
    "gemini-interactions": ("interaction", "model"),  # interaction.created / completed
}


def _files() -> list[tuple[str, Path]]:
    found = []
    for folder in FOLDERS:
        for dialect in DIALECTS:
            if (folder / dialect).is_dir():
                found += [
                    (dialect, path)
                    for path in sorted((folder / dialect).glob("*.sse"))
                    if not (dialect == "openai-chat" and _usage_on_a_choice_chunk(path))
                ]
    return found


def _usage_on_a_choice_chunk(path: Path) -> bool:
    """A Chat stream whose usage rides on its finish chunk (Mistral, xAI): there the fast path adds
    OpenAI's own ``choices: []`` usage chunk before ``[DONE]`` by design (fast_path.py), so it is not
    a stream whose frames pass unchanged."""
    for frame in path.read_bytes().split(b"\n\n"):
        if b'"usage":{' in frame and b'"choices":[]' not in frame:
            return True
    return False


FILES = _files()


def _frames(raw: bytes) -> list[SSEFrame]:
    decoder = SSEDecoder()
    frames = decoder.feed(raw)
    decoder.close()
    return frames


def _parsed(data: str) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return data  # [DONE], a cut frame


def _holder(obj: Any, dialect: str) -> dict[str, Any] | None:
    parent, _ = PLACES[dialect]
    if not isinstance(obj, dict):
        return None
    inner = obj if parent is None else obj.get(parent)
    return inner if isinstance(inner, dict) else None


def _with_model(obj: Any, dialect: str, model: str) -> Any:
    """``obj`` with the model at the dialect's place set to ``model`` (a copy; as is without one)."""
    holder = _holder(obj, dialect)
    key = PLACES[dialect][1]
    if holder is None or not isinstance(holder.get(key), str):
        return obj
    copy = orjson.loads(orjson.dumps(obj))
    _holder(copy, dialect)[key] = model  # type: ignore[index]
    return copy


def _words() -> list[str]:
    """Every key and string value in the captures (stop reasons are values too)."""
    words: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                words.add(key)
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)
        elif isinstance(node, str):
            words.add(node)

    for _, path in FILES:
        for frame in _frames(path.read_bytes()):
            walk(_parsed(frame.data))
    return sorted(w for w in words if len(w) <= 200)


WORDS = _words() if FILES else []


def upstream_frames(dialect: str, path: Path, model: str) -> list[SSEFrame]:
    """The capture as an upstream reporting ``model``: only the model places are rewritten."""
    frames = []
    for frame in _frames(path.read_bytes()):
        obj = _parsed(frame.data)
        holder = _holder(obj, dialect)
        key = PLACES[dialect][1]
        data = frame.data
        if holder is not None and isinstance(holder.get(key), str):
            data = orjson.dumps(_with_model(obj, dialect, model)).decode()
        frames.append(SSEFrame(data, frame.event))
    return frames


def forward(dialect: str, frames: list[SSEFrame], caller_model: str) -> tuple[list[SSEFrame], bool]:
    """What the fast path writes for ``frames`` (and whether the stream ended with its terminator)."""
    codec = codec_for(dialect)
    req = ChatRequest(model=caller_model, messages=[], stream=True)
    encoder = codec.stream_encoder(EncodeContext(model=caller_model, upstream_dialect=dialect, request=req))
    passthrough = FramePassthrough(dialect, caller_model, True, encoder)
    decoder = codec.stream_decoder()
    out = b""
    ended = False
    for frame in frames:
        events = decoder.feed(frame)
        out += passthrough.render([(frame, events)])
        ended = ended or any(type(e) is End for e in events)
        if any(type(e) is StreamError for e in events):
            break
    if not ended:
        ended = any(type(e) is End for e in decoder.close())
    return _frames(out), ended


@pytest.mark.skipif(not FILES, reason="no captures")
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    case=st.sampled_from(FILES),
    upstream_model=st.sampled_from(WORDS or ["x"]),
    caller_model=st.sampled_from((WORDS or ["x"]) + ["my-alias"]),
)
def test_only_the_model_places_change(case: tuple[str, Path], upstream_model: str, caller_model: str) -> None:
    dialect, path = case
    frames = upstream_frames(dialect, path, upstream_model)
    got, ended = forward(dialect, frames, caller_model)
    want = [(f.event, _with_model(_parsed(f.data), dialect, caller_model)) for f in frames]
    seen = [(f.event, _parsed(f.data)) for f in got]
    assert seen == want[: len(seen)], f"{path.name}: a frame changed beyond its model field"
    if ended:
        assert len(seen) == len(want), f"{path.name}: a finished stream lost frames"


@pytest.mark.parametrize("dialect", DIALECTS)
def test_every_dialect_declares_where_its_model_sits(dialect: str) -> None:
    place = codec_for(dialect).fast_path.model
    assert (place.parent, place.key) == PLACES[dialect]


@pytest.mark.parametrize(
    "word", ["text", "length", "message", "thinking", "end_turn", "content_block_delta", "model", "STOP"]
)
@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_model_named_like_the_wire_renames_only_the_model(dialect: str, word: str) -> None:
    """The same as the property, for every ``text.sse``/``max_tokens.sse``, named cases first."""
    for name in ("text", "max_tokens", "tool_call", "thinking"):
        path = ROOT / "captures" / dialect / f"{name}.sse"
        if not path.exists():
            continue
        frames = upstream_frames(dialect, path, word)
        got, ended = forward(dialect, frames, "my-alias")
        assert ended
        assert [(f.event, _parsed(f.data)) for f in got] == [
            (f.event, _with_model(_parsed(f.data), dialect, "my-alias")) for f in frames
        ]
        assert "my-alias" in b"".join(encode_frame(f.data, f.event) for f in got).decode()
