"""One upstream MCP server: a supervised client session, its tool list, and calls within a timeout.

Each ``[[mcp_servers]]`` entry gets one long-lived session (the official SDK's ``Client``) owned by
one supervisor task: it connects (streamable HTTP, legacy HTTP+SSE, or a child process over stdio),
lists the tools, then checks the session every ``HEALTH_SECONDS`` by listing again (which also picks
up a changed tool list). A server that says its list changed is listed again at once: the
handshake revisions' ``notifications/tools/list_changed`` (on stdio, the legacy SSE stream, or a
request's stream), and on 2026-07-28 the ``subscriptions/listen`` stream the session opens for
tool changes; ``on_change`` is then told (the endpoint passes it on to its own listeners). A session that fails (a call's transport error, a check that fails or is
late, a stdio child that died) is closed and opened again with backoff (``BACKOFF_*``); meanwhile
the server is *down*: its tools are left out of ``tools/list`` and a call to it is an error result
at once. So a dead or slow server never holds up the list or another server's calls.

Credentials: ``headers_env`` values are read from the environment when the session opens and go
only on this server's HTTP client; they are never logged (errors name the exception type only).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import TYPE_CHECKING, Any

import anyio

if TYPE_CHECKING:
    from gateway.settings import McpServerSettings

log = logging.getLogger("gateway.mcp")

HEALTH_SECONDS = 5.0  # how often a live session is checked (a tools/list, which also refreshes the list)
BACKOFF_FIRST = 0.25  # the first wait before reconnecting; doubled per failure ...
BACKOFF_MAX = 30.0  # ... up to this
MAX_TOOL_PAGES = 100  # an upstream's pagination is followed at most this far
PROTOCOL_META_PREFIX = "io.modelcontextprotocol/"  # _meta keys the protocol reserves (per hop)


class ServerDown(Exception):
    """The server has no live session (down, starting, or its session just failed)."""


class Upstream:
    """The gateway's client of one MCP server."""

    def __init__(self, settings: McpServerSettings) -> None:
        self.settings = settings
        self.name = settings.name
        self.timeout = settings.timeout
        self.client: Any = None  # mcp.Client while up
        self.generation = 0  # bumped each time the tool list is replaced (the catalog's cache key)
        self.names: frozenset[str] = frozenset()  # the server's own tool names, for a call's check
        self.tools = []  # the server's tools, as it listed them (wire dicts)
        self.last_error: str | None = None
        self.down_since: float | None = time.time()
        self._broken = asyncio.Event()
        self._stopped = False
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._up = asyncio.Event()
        self._changed = asyncio.Event()  # the server said its tool list changed
        self.on_change: Any = None  # async () -> None, after a list changed by the server's word was read
        for header_name, var in settings.headers_env.items():
            if not os.environ.get(var):
                log.warning("MCP server %s: $%s (header %s) is not set; it is sent empty", self.name, var, header_name)

    @property
    def tools(self) -> list[dict[str, Any]]:
        return self._tools

    @tools.setter
    def tools(self, tools: list[dict[str, Any]]) -> None:
        self._tools = tools
        self.names = frozenset(str(t.get("name", "")) for t in tools)
        self.generation += 1

    @property
    def up(self) -> bool:
        return self.client is not None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._supervise(), name=f"mcp-{self.name}")

    async def wait_up(self, seconds: float) -> bool:
        """Wait (at most ``seconds``) for the first attempt to connect, whether it worked or not:
        startup lists the tools of the servers that answer before serving, without waiting out a
        down one's backoff."""
        try:
            await asyncio.wait_for(self._up.wait(), seconds)
        except TimeoutError:
            return False
        return True

    async def stop(self) -> None:
        self._stopped = True
        self._stop.set()
        self._broken.set()
        if self._task is not None:
            try:
                await asyncio.wait_for(self._task, 5.0)
            except (TimeoutError, asyncio.CancelledError):
                self._task.cancel()
            except Exception:
                pass

    def _transport(self) -> Any:
        """The SDK transport for this server (a fresh one per session)."""
        s = self.settings
        if s.command:
            from mcp.client.stdio import StdioServerParameters, get_default_environment, stdio_client

            env = get_default_environment()
            env.update({name: os.environ.get(var, "") for name, var in s.env_env.items()})
            return stdio_client(StdioServerParameters(command=s.command[0], args=list(s.command[1:]), env=env))
        headers = {name: os.environ.get(var, "") for name, var in s.headers_env.items()}
        assert s.url is not None
        if s.transport == "sse":
            from mcp.client.sse import sse_client

            return sse_client(s.url, headers=headers, timeout=self.timeout)
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        return streamable_http_client(s.url, http_client=create_mcp_http_client(headers=headers))

    async def _supervise(self) -> None:
        from mcp import Client

        backoff = BACKOFF_FIRST
        while not self._stopped:
            try:
                async with Client(
                    self._transport(), cache=None, read_timeout_seconds=self.timeout, message_handler=self._on_message
                ) as client:
                    with anyio.fail_after(self.timeout):
                        self.tools = await self._list(client)
                    self.client, self.last_error, self.down_since = client, None, None
                    self._broken.clear()
                    self._up.set()
                    log.info("MCP server %s is up: %d tools", self.name, len(self.tools))
                    backoff = BACKOFF_FIRST
                    listening = asyncio.get_running_loop().create_task(self._listen(client))
                    try:
                        await self._watch(client)
                    finally:
                        listening.cancel()
            except asyncio.CancelledError:
                self.client = None
                raise
            except Exception as exc:
                self._note_failure(exc)
            except BaseExceptionGroup as exc:  # the SDK's task group, holding a failure and its cancels
                self._note_failure(exc)
            self.client = None
            if self._stopped:
                return
            try:
                await asyncio.wait_for(self._stop.wait(), backoff)
            except TimeoutError:
                pass
            backoff = min(backoff * 2, BACKOFF_MAX)

    def _note_failure(self, exc: BaseException) -> None:
        self._up.set()  # the first attempt is over (wait_up)
        if self.client is not None or self.last_error is None:
            log.warning("MCP server %s is down (%s); retrying with backoff", self.name, _describe(exc))
        self.client = None
        self.last_error = _describe(exc)
        if self.down_since is None:
            self.down_since = time.time()

    async def _watch(self, client: Any) -> None:
        """Until the session fails or the gateway stops: a check every ``HEALTH_SECONDS``, and a
        list at once when the server says its tools changed."""
        while not self._stopped:
            woken = [asyncio.ensure_future(e.wait()) for e in (self._broken, self._changed)]
            try:
                await asyncio.wait(woken, timeout=HEALTH_SECONDS, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for waiter in woken:
                    waiter.cancel()
            if self._broken.is_set():
                if not self._stopped:
                    raise ServerDown(self.last_error or "the session failed")
                return
            changed = self._changed.is_set()
            self._changed.clear()
            with anyio.fail_after(self.timeout):
                tools = await self._list(client)
            if changed or tools != self.tools:
                self.tools = tools
                log.info("MCP server %s: its tool list changed (%d tools)", self.name, len(tools))
                if self.on_change is not None:
                    await self.on_change()

    async def _on_message(self, message: Any) -> None:
        """The session's incoming messages: a handshake-era ``notifications/tools/list_changed``."""
        if getattr(message, "method", None) == "notifications/tools/list_changed":
            self._changed.set()

    async def _listen(self, client: Any) -> None:
        """On a 2026-07-28 session: the ``subscriptions/listen`` stream of tool-list changes (a
        server that does not serve it, or an older revision, leaves the ``HEALTH_SECONDS`` check)."""
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                async for _ in subscription:
                    self._changed.set()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.debug("MCP server %s: no subscriptions/listen (%s)", self.name, _describe(exc))

    @staticmethod
    async def _list(client: Any) -> list[dict[str, Any]]:
        tools: list[dict[str, Any]] = []
        cursor = None
        for _ in range(MAX_TOOL_PAGES):
            page = await client.list_tools(cursor=cursor)
            tools += [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in page.tools]
            cursor = page.next_cursor
            if not cursor:
                break
        return tools

    async def call(self, tool: str, arguments: dict[str, Any] | None, progress: Any = None) -> Any:
        """The server's ``tools/call`` result (the SDK's ``CallToolResult``, passed on as it is, with
        no dump and re-validation); ``ServerDown`` / ``TimeoutError`` when it cannot answer within
        the timeout. A JSON-RPC error from the server propagates (``MCPError``)."""
        client = self.client
        if client is None:
            raise ServerDown(self.last_error or "not connected yet")
        from mcp.shared.exceptions import MCPError
        from mcp_types.jsonrpc import CONNECTION_CLOSED

        try:
            with anyio.fail_after(self.timeout):
                result = await client.call_tool(tool, arguments, progress_callback=progress)
        except MCPError as exc:
            if exc.code != CONNECTION_CLOSED:
                raise  # the server's own JSON-RPC error: the caller gets it as it is
            self.last_error = "the connection closed"
            self._broken.set()
            raise ServerDown(self.last_error) from None
        except TimeoutError:
            raise
        except Exception as exc:  # the transport failed: reconnect
            self.last_error = _describe(exc)
            self._broken.set()
            raise ServerDown(self.last_error) from None
        meta = result.meta
        if meta:  # the protocol's own keys (the server's serverInfo …) are this hop's, not the
            # caller's: the gateway's server stamps its own; the server's other keys pass
            kept = {k: v for k, v in meta.items() if not k.startswith(PROTOCOL_META_PREFIX)}
            if len(kept) != len(meta):
                result = result.model_copy(update={"meta": kept or None})
        return result

    def status(self) -> dict[str, Any]:
        """This server's line in ``/readyz``: never its URL's credentials nor its headers."""
        line: dict[str, Any] = {"up": self.up, "tools": len(self.tools) if self.up else 0}
        if not self.up:
            line["error"] = self.last_error or "starting"
        return line


def _describe(exc: BaseException) -> str:
    """An error's kind for the log and ``/readyz``: the exception types (never their text, which can
    carry a URL with credentials or a header echoed back)."""
    if isinstance(exc, BaseExceptionGroup):
        return ", ".join(sorted({_describe(e) for e in exc.exceptions}))
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, ServerDown):
        return str(exc)
    return type(exc).__name__
