"""What every stream decoder shares: reading a frame, numbering blocks, reading a token count.

Five decoders (one per dialect package) used to carry five copies of this bookkeeping with drifting
rules. Each piece lives here once; a decoder keeps only what is true of its own wire.

* ``frame_object`` (and ``frame_array`` for Gemini): the one JSON-frame parser. **The bad-frame
  rule**: a frame whose data is not a JSON object ends the stream with ``bad_frame(...)``, a
  ``StreamError("bad_gateway", 502)`` naming the dialect, the frame's ``event`` and the first bytes
  of its data. Never a skip: a skipped frame may have held text, so skipping could give the caller
  a shorter answer that still looks finished. (Terminator sentinels that are not JSON, such as
  ``data: [DONE]``, are matched by the decoder before it parses.)
* ``Blocks``: the block numbering of one stream and the ordering contract of ``gateway/events.py``:
  indices are handed out 0, 1, 2 … in the order blocks open (so skipped upstream blocks leave no
  gap), a block stops at most once, ``stop_all`` closes what is still open, in opening order,
  before an ``End``, and a delta's block is found in ``Blocks.live``, which holds open blocks only
  (so no delta precedes its ``BlockStart`` or follows its ``BlockStop``). Blocks may interleave,
  as the contract allows.
* ``count``: a token count as an ``int``, or ``None`` (not reported) — never a silent zero.
* ``as_dict`` / ``as_list``: a field read as the type it should have, else empty.
* ``usage_mismatch``: the warning for a usage record whose parts do not add up to its total.
* ``prompt_side``: the part of a ``Usage`` known before the answer (for early usage).
* ``final_rest``: what a final event's whole text adds to the deltas already sent, only when the
  deltas are its prefix (a final text that disagrees never splices a fragment onto them).

A dialect's ``usage.py`` and ``stop_reasons.py`` expose the same verbs in every package:
``convert_usage`` (wire object → ``Usage | None``) / ``render_usage`` (``Usage`` → wire object), and
``map_stop_reason`` (wire value → ``StopReason``) / ``render_stop_reason`` (``End`` → wire value). The
wire fields behind ``convert_usage`` are tabled in ``gateway/dialects/usage_fields.py``;
``tests/dialects/test_kit.py`` checks that every registered dialect has the four names.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import orjson

from gateway.dialects.common import warn_upstream
from gateway.events import (
    BlockKind,
    BlockStart,
    BlockStop,
    Event,
    StreamError,
    Usage,
)
from gateway.framing.sse import SSEFrame

_EXCERPT = 200  # characters of a bad frame's data quoted in the error
_loads = orjson.loads  # bound once: these run for every upstream frame
_JSONDecodeError = orjson.JSONDecodeError


def frame_object(frame: SSEFrame) -> dict[str, Any] | None:
    """The frame's data as a JSON object; ``None`` when it is not one: the caller then ends the
    stream with ``bad_frame`` (module docstring)."""
    try:
        value = _loads(frame.data)
    except _JSONDecodeError:
        return None
    return value if type(value) is dict else None


def frame_array(frame: SSEFrame) -> list[Any] | None:
    """The frame's data as a JSON array, for the one dialect that accepts one (Gemini: an array body
    a proxy split into lines); ``None`` when it is not one. Called only after ``frame_object``
    said no, so the common path parses once."""
    try:
        value = _loads(frame.data)
    except _JSONDecodeError:
        return None
    return value if type(value) is list else None


def bad_frame(frame: SSEFrame, dialect: str, problem: str | None = None) -> StreamError:
    """The ``StreamError`` that ends a stream at a frame the decoder cannot read. ``problem`` says
    what is wrong with it; by default "is not JSON" or "is not a JSON object"."""
    if problem is None:
        try:
            _loads(frame.data)
            problem = "is not a JSON object"
        except _JSONDecodeError:
            problem = "is not JSON"
    where = f"a {frame.event!r} frame" if frame.event else "a frame"
    return StreamError("bad_gateway", f"{dialect} upstream sent {where} that {problem}: {frame.data[:_EXCERPT]!r}", 502)


def as_dict(value: object) -> dict[str, Any]:
    """A field that should be an object; anything else reads as empty (decoders never throw)."""
    return value if isinstance(value, dict) else {}


def as_list(value: object) -> list[Any]:
    """A field that should be an array; anything else reads as empty (decoders never throw)."""
    return value if isinstance(value, list) else []


def count(value: object) -> int | None:
    """A token count from the wire: an ``int``; an integral float (``12.0``) or a string of ASCII
    digits (``"12"``) as that integer; anything else (``None``, ``true``, ``12.5``, ``"n/a"``) reads
    as ``None``, "not reported"."""
    if type(value) is int:
        return value
    if type(value) is float:
        return int(value) if value.is_integer() else None
    if type(value) is str and value.isascii() and value.isdigit():
        return int(value)
    return None


def final_rest(sent: str, final: str) -> str | None:
    """What a final event's full text (Responses ``output_text.done``, ``function_call_arguments.done``)
    adds to what the deltas already sent: the rest when the deltas are its prefix (``""`` when
    they said it all), ``None`` when the two disagree. Then the caller keeps what was sent and
    reports the mismatch: the deltas are already on the caller's screen, and splicing the final
    text's tail onto a different beginning would put a fragment in the middle of a word."""
    if final.startswith(sent):
        return final[len(sent) :]
    return None


def usage_mismatch(dialect: str, total_field: str, total: int, parts: dict[str, int | None]) -> None:
    """An upstream usage record whose parts do not add up to the total it reports: a warning
    naming the provider (its convention is not one the dialect's ``usage.py`` knows)."""
    said = ", ".join(f"{name}={value}" for name, value in parts.items() if value is not None)
    warn_upstream(dialect, f"usage {total_field}", f"usage parts ({said}) do not add up to {total_field}={total}")


def prompt_side(usage: Usage) -> Usage:
    """What a usage says of the prompt: sent early, before the answer, by decoders whose upstream
    states the prompt's counts on its first chunk. Output counts so far are left out: clients that
    add the start's output to the end's would count them twice."""
    return Usage(input=usage.input, cache_read=usage.cache_read, tool_use=usage.tool_use)


class Blocks:
    """The block numbering of one stream (module docstring). Methods append to ``out``.

    A block is opened under a ``key``: the dialect's own name for it (Anthropic's upstream
    ``index``, an Interactions step index; by default the block's own index). ``live`` maps the key
    of every open block to its index, in opening order: a decoder finds a delta's block there, so
    a delta for a block that never started, or already stopped, finds nothing and is dropped.
    (A plain dict, read directly: a method call per delta would cost more than the rest of the
    lookup.)
    """

    __slots__ = ("_next", "live")

    def __init__(self) -> None:
        self._next = 0
        self.live: dict[Hashable, int] = {}

    @property
    def started(self) -> int:
        """How many blocks were opened so far."""
        return self._next

    def start(
        self,
        kind: BlockKind,
        out: list[Event],
        *,
        key: Hashable = None,
        id: str | None = None,
        name: str | None = None,
        data: str | None = None,
        namespace: str | None = None,
        item: dict[str, Any] | None = None,
        origin: str | None = None,
    ) -> int:
        """Open the next block under ``key`` (a block still open under the same key is stopped
        first: one key names one open block); its index."""
        index = self._next
        self._next = index + 1
        live = self.live
        if key is None:
            key = index
        elif key in live:
            out.append(BlockStop(live.pop(key)))
        live[key] = index
        out.append(BlockStart(index, kind, id, name, data, namespace, item, origin))
        return index

    def stop(self, key: Hashable, out: list[Event]) -> None:
        """Close the block open under ``key``; nothing when there is none (never started, or stopped)."""
        index = self.live.pop(key, None)
        if index is not None:
            out.append(BlockStop(index))

    def stop_all(self, out: list[Event]) -> None:
        """Close every open block, in opening order (before an ``End``)."""
        for index in self.live.values():
            out.append(BlockStop(index))
        self.live.clear()
