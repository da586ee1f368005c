"""Embeddings: the small IR every embedding wire format reads and writes, and which wire an upstream speaks.

One mechanism, N callers + M upstreams, no pair translators: a caller's parser
(``openai_chat/embeddings.py``, ``gemini/embeddings.py``) makes an ``EmbedRequest``; the relay
(gateway/relay/embeddings.py) cuts its inputs into parts of the upstream wire's per-call limit and
asks the wire (``EmbedWire``, found by ``embedding_wires.wire_for``) for one ``UpstreamCall`` per part; the wire decodes each answer into
an ``EmbedResult``; the caller's encoder renders the reassembled result.

Task types are Gemini's vocabulary (``RETRIEVAL_QUERY`` …: the richest of the wire formats); each
wire maps them to its own (Cohere's ``input_type``) or leaves them out (OpenAI has none).

A vector is a ``list[float]``, a ``str`` — the base64 of its little-endian float32 bytes, as
OpenAI's ``encoding_format: "base64"`` carries it — or a ``RawFloats``: the JSON array exactly as
the upstream sent it. Neither of the last two is ever turned into Python floats when the caller
wants the same encoding: a base64 vector is passed on as the string it came as, a float array as
its bytes (``orjson.Fragment``) — parsing 1,536 floats and writing them again would cost more than
the rest of the request (bench/README.md "Embeddings").
"""

from __future__ import annotations

import base64
import sys
from array import array
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import orjson

from gateway.dialects.base import UpstreamCall
from gateway.errors import GatewayError


class RawFloats:
    """A JSON array of numbers as the upstream wrote it (``cut_float_arrays``), checked to hold
    only number characters. (Not a ``bytes`` subclass: orjson takes only exact ``bytes``.)"""

    __slots__ = ("raw",)

    def __init__(self, raw: bytes) -> None:
        self.raw = raw

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RawFloats) and other.raw == self.raw

    def __hash__(self) -> int:
        return hash(self.raw)


Vector = list[float] | str | RawFloats
Encoding = Literal["float", "base64"]

# Gemini's EmbedContentRequest.taskType values (ai.google.dev/api/embeddings#tasktype)
TASK_TYPES = frozenset(
    {
        "TASK_TYPE_UNSPECIFIED",
        "RETRIEVAL_QUERY",
        "RETRIEVAL_DOCUMENT",
        "SEMANTIC_SIMILARITY",
        "CLASSIFICATION",
        "CLUSTERING",
        "QUESTION_ANSWERING",
        "FACT_VERIFICATION",
        "CODE_RETRIEVAL_QUERY",
    }
)


@dataclass(slots=True)
class EmbedRequest:
    """What to embed, whoever asked. ``inputs``: texts, or token arrays when ``tokens`` (OpenAI
    callers may send token ids; only upstreams whose wire ``takes_tokens`` accept them)."""

    model: str
    inputs: list[str] | list[list[int]]
    tokens: bool = False
    dimensions: int | None = None
    task_type: str | None = None  # Gemini's vocabulary; None: the upstream's default
    titles: list[str | None] | None = None  # per input (Gemini's ``title``, for RETRIEVAL_DOCUMENT)
    encoding: Encoding = "float"  # what the caller wants its vectors as
    user: str | None = None
    dialect: str = ""  # the caller's


@dataclass(slots=True)
class EmbedResult:
    """One upstream answer (or the reassembled parts): vectors in input order, the input tokens the
    upstream reported (None: it reported none: the relay estimates and says so)."""

    vectors: list[Vector]
    input_tokens: int | None = None
    model: str | None = None  # the model the upstream says answered


@dataclass(slots=True)
class EmbedPart:
    """The slice of a request's inputs one upstream call carries."""

    inputs: list[str] | list[list[int]]
    titles: list[str | None] | None = None
    start: int = 0  # where in the request's inputs it begins


@dataclass(slots=True)
class Answer:
    """An upstream's HTTP answer to one part, as the wire decodes it."""

    status: int
    body: bytes
    headers: Mapping[str, str] = field(default_factory=dict)


class EmbedWire(Protocol):
    """One upstream embedding wire format (OpenAI's ``/embeddings``, Gemini's
    ``batchEmbedContents``, Vertex's ``:predict``, Bedrock Titan's and Cohere's InvokeModel bodies)."""

    name: str
    takes_tokens: bool  # token-id arrays as input (OpenAI); else text only

    def max_batch(self, model: str) -> int:
        """Inputs one call may carry (the relay splits larger requests)."""
        ...

    def max_dimensions(self, model: str) -> int | None:
        """The model's largest output size when known (a larger ``dimensions`` is refused); None: unknown."""
        ...

    def supports_dimensions(self, model: str) -> bool: ...

    def build(self, req: EmbedRequest, part: EmbedPart, model: str, settings: Any) -> UpstreamCall:
        """The call for one part, complete: path, query and body as the platform wants them."""
        ...

    def decode(self, answer: Answer, part: EmbedPart, req: EmbedRequest) -> EmbedResult:
        """The part's vectors, in order; ``GatewayError`` (bad_gateway) for an answer not of this shape."""
        ...


# -- vectors ---------------------------------------------------------------------------------

_LITTLE = sys.byteorder == "little"


def to_base64(vector: Vector) -> str:
    """A vector as OpenAI's base64: little-endian float32 bytes."""
    if isinstance(vector, str):
        return vector
    packed = array("f", orjson.loads(vector.raw) if isinstance(vector, RawFloats) else vector)
    if not _LITTLE:
        packed.byteswap()
    return base64.b64encode(packed.tobytes()).decode("ascii")


def to_floats(vector: Vector) -> list[float]:
    if isinstance(vector, RawFloats):
        floats: list[float] = orjson.loads(vector.raw)
        return floats
    if not isinstance(vector, str):
        return vector
    packed = array("f")
    packed.frombytes(base64.b64decode(vector))
    if not _LITTLE:
        packed.byteswap()
    return packed.tolist()


def as_encoding(vectors: Sequence[Vector], encoding: Encoding) -> list[Any]:
    """``vectors`` as the caller asked for them, ready for ``orjson.dumps``: a base64 string as it
    came, a ``RawFloats`` as its own bytes (an ``orjson.Fragment``), the others converted."""
    if encoding == "base64":
        return [to_base64(v) for v in vectors]
    return [orjson.Fragment(v.raw) if isinstance(v, RawFloats) else to_floats(v) for v in vectors]


_NUMBER_BYTES = b"0123456789.eE+-, \t\r\n"


_SPACE = b" \t\r\n"


def _value_start(body: bytes, at: int) -> int:
    """Where the value after a key ending at ``at`` begins (past ``:`` and whitespace); -1 when
    no colon follows (the key was a string value)."""
    size = len(body)
    while at < size and body[at] in _SPACE:
        at += 1
    if at >= size or body[at] != 0x3A:  # ":"
        return -1
    at += 1
    while at < size and body[at] in _SPACE:
        at += 1
    return at if at < size else -1


def cut_float_arrays(body: bytes, key: bytes) -> tuple[bytes, list[RawFloats]]:
    """``body`` with every ``"<key>": [numbers]`` array replaced by ``0``, and those arrays'
    bytes, in order: the JSON parser then reads the small rest, never a float. ``"<key>"``
    followed by a colon is a key (a string value is followed by ``,`` ``}`` or ``]``; a quote
    inside a string is escaped). An array holding anything but number characters, or a value that
    is not an array, is left in the body for the parser (and the wire's checks)."""
    needle = b'"' + key + b'"'
    arrays: list[RawFloats] = []
    pieces: list[bytes] = []
    copied = search = 0
    find = body.find
    while True:
        at = find(needle, search)
        if at < 0:
            break
        search = at + len(needle)
        start = _value_start(body, search)  # (never a find of "[" ahead: on a base64 body that scans it all)
        if start < 0 or body[start] != 0x5B:  # "["
            continue
        end = find(b"]", start)
        if end < 0:
            continue
        inner = body[start + 1 : end]
        if inner.translate(None, _NUMBER_BYTES) or not inner.strip():
            continue
        pieces += (body[copied:start], b"0")
        arrays.append(RawFloats(body[start : end + 1]))
        copied = search = end + 1
    if not arrays:
        return body, arrays
    pieces.append(body[copied:])
    return b"".join(pieces), arrays


def bad_answer(wire: str, why: str) -> GatewayError:
    """An upstream 2xx answer that is not its wire's shape: a 502 that says which and why."""
    return GatewayError("bad_gateway", f"the upstream's {wire} embeddings answer is not valid: {why}", 502)


def float_vector(value: Any, wire: str, raw: Iterator[RawFloats] | None = None) -> Vector:
    """A vector of a parsed answer: a ``0`` put in by ``cut_float_arrays`` is the next of its
    ``raw`` arrays; else a JSON array of numbers (its first item checked: a per-number check
    would cost more than the whole relay of a 1,536-dimension vector)."""
    if value == 0 and type(value) is int and raw is not None:
        found = next(raw, None)
        if found is not None:
            return found
    if not isinstance(value, list) or not value or type(value[0]) not in (float, int):
        raise bad_answer(wire, "a vector is not a non-empty array of numbers")
    floats: list[float] = value
    return floats
