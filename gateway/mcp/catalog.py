"""The tool catalog: every live server's tools under ``<server>_<tool>``, what a key may see, pages.

Names: a server's name has no ``_`` (checked in the settings), so ``files_read_file`` is tool
``read_file`` of server ``files`` however the tool itself is spelt. Descriptions and the input /
output schemas are the server's own, unchanged: only ``name`` is rewritten.

Pagination: ``tools/list`` answers ``PAGE_SIZE`` tools a page; the cursor is the offset into the
caller's filtered, sorted list (opaque base64 to the client). The list is rebuilt each time (a few
hundred tools are microseconds), so a server going down or coming back shows at the next list.
"""

from __future__ import annotations

import base64
import binascii
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gateway.governance.keys import KeySpec
    from gateway.mcp.upstream import Upstream

PAGE_SIZE = 100


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
    def __init__(self, upstreams: dict[str, Upstream]) -> None:
        self.upstreams = upstreams

    def resolve(self, name: str) -> tuple[Upstream, str] | None:
        """The server and its own tool name for a listed name, or None when no server has it."""
        server, sep, tool = name.partition("_")
        upstream = self.upstreams.get(server)
        if not sep or not tool or upstream is None:
            return None
        return upstream, tool

    def visible(self, spec: KeySpec | None) -> list[dict[str, Any]]:
        """The tools ``spec`` may see, from the servers that are up, sorted by listed name."""
        tools = []
        for upstream in self.upstreams.values():
            if not upstream.up:
                continue
            for tool in upstream.tools:
                name = f"{upstream.name}_{tool.get('name', '')}"
                if allowed(spec, name):
                    tools.append({**tool, "name": name})
        tools.sort(key=lambda t: str(t["name"]))
        return tools

    def page(self, spec: KeySpec | None, cursor: str | None) -> tuple[list[dict[str, Any]], str | None]:
        tools = self.visible(spec)
        start = decode_cursor(cursor)
        end = start + PAGE_SIZE
        return tools[start:end], encode_cursor(end) if end < len(tools) else None
