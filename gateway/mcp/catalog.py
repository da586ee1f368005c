"""The tool catalog: every live server's tools under ``<server>_<tool>``, what a key may see, pages.

Names: a server's name has no ``_`` (checked in the settings), so ``files_read_file`` is tool
``read_file`` of server ``files`` however the tool itself is spelt. Descriptions and the input /
output schemas are the server's own, unchanged: only ``name`` is rewritten.

Pagination: ``tools/list`` answers ``PAGE_SIZE`` tools a page; the cursor is the offset into the
caller's filtered, sorted list (opaque base64 to the client).

Cost: the renamed, sorted list — each tool already the SDK's ``Tool`` model, validated once — is
built when a server's list or its up/down state changes (``Upstream.generation``), and each key's
filtered view (by its ``mcp_tools`` globs) once per such change; a ``tools/list`` is then a slice
(the 3.4 ms of globbing and copying 500 tools per list before, bench/README.md "MCP gateway").
A server going down or coming back still shows at the next list.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gateway.governance.keys import KeySpec
    from gateway.mcp.upstream import Upstream

PAGE_SIZE = 100
MAX_VIEWS = 1024  # keys' filtered views kept (one per distinct mcp_tools); past it they are built again


class BadCursor(ValueError):
    """A cursor this gateway did not hand out."""


def encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(f"o:{offset}".encode()).decode()


def decode_cursor(cursor: str | None) -> int:
    if not cursor:
        return 0
    try:
        text = base64.urlsafe_b64decode(cursor.encode()).decode()
        if not text.startswith("o:"):
            raise ValueError
        offset = int(text[2:])
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise BadCursor(f"invalid cursor {cursor[:64]!r}") from None
    if offset < 0:
        raise BadCursor(f"invalid cursor {cursor[:64]!r}")
    return offset


def allowed(spec: KeySpec | None, name: str) -> bool:
    """A plain ``[auth]`` key (or no auth) may use every tool, as every model; a named key its globs."""
    return spec is None or spec.allows_tool(name)


class Catalog:
    def __init__(self, upstreams: dict[str, Upstream], model: Callable[[dict[str, Any]], Any] = dict) -> None:
        self.upstreams = upstreams
        self.model = model  # a listed tool's wire dict -> what tools/list answers with (the SDK's Tool)
        self._signature: tuple[tuple[bool, int], ...] | None = None
        self._listed: list[tuple[str, Any]] = []  # (listed name, tool) of every live server, sorted
        self._views: dict[tuple[str, ...] | None, list[Any]] = {}  # mcp_tools (None: every tool) -> tools

    def resolve(self, name: str) -> tuple[Upstream, str] | None:
        """The server and its own tool name for a listed name, or None when no server has it."""
        server, sep, tool = name.partition("_")
        upstream = self.upstreams.get(server)
        if not sep or not tool or upstream is None:
            return None
        return upstream, tool

    def _current(self) -> list[tuple[str, Any]]:
        signature = tuple((u.up, u.generation) for u in self.upstreams.values())
        if signature != self._signature:
            listed = []
            for upstream in self.upstreams.values():
                if not upstream.up:
                    continue
                for tool in upstream.tools:
                    name = f"{upstream.name}_{tool.get('name', '')}"
                    listed.append((name, self.model({**tool, "name": name})))
            listed.sort(key=lambda pair: pair[0])
            self._listed, self._views, self._signature = listed, {}, signature
        return self._listed

    def visible(self, spec: KeySpec | None) -> list[Any]:
        """The tools ``spec`` may see, from the servers that are up, sorted by listed name."""
        listed = self._current()
        view_key = None if spec is None else (spec.mcp_tools or ())
        view = self._views.get(view_key)
        if view is None:
            if len(self._views) >= MAX_VIEWS:
                self._views.clear()
            view = self._views[view_key] = [tool for name, tool in listed if allowed(spec, name)]
        return view

    def page(self, spec: KeySpec | None, cursor: str | None) -> tuple[list[Any], str | None]:
        tools = self.visible(spec)
        start = decode_cursor(cursor)
        end = start + PAGE_SIZE
        return tools[start:end], encode_cursor(end) if end < len(tools) else None
