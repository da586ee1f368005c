"""Loopback MCP servers built with the official SDK's server side (``MCPServer``), as the gateway's upstreams.

``files``: streamable HTTP, refuses (401) any request without ``x-files-token: files-secret``;
counts every ``tools/call`` that reaches it (``calls``), so a test can see that a refused call never
arrived. Its tools: ``read_file`` (structured output), ``delete_file`` (the one a key must not
call), ``fail`` (an ``isError`` result), ``slow`` (sleeps), ``progress`` (reports progress),
``grow`` (adds a tool ``added_<name>`` and says the list changed: a ``subscriptions/listen`` event
on 2026-07-28, ``notifications/tools/list_changed`` on the handshake revisions).
The stdio server is ``stdio_server.py`` next to this file.
"""

import asyncio
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel

FILES_TOKEN = "files-secret"


class FileInfo(BaseModel):
    path: str
    size: int
    text: str


def files_server() -> Any:
    server: Any = MCPServer("files")

    @server.tool(description="Read a file and describe it")
    def read_file(path: str) -> FileInfo:
        return FileInfo(path=path, size=len(path), text=f"contents of {path}")

    @server.tool(description="Delete a file")
    def delete_file(path: str) -> str:
        return f"deleted {path}"

    @server.tool(description="Always fails")
    def fail(reason: str) -> str:
        raise ValueError(f"failed: {reason}")

    @server.tool(description="Answers after a while")
    async def slow(seconds: float) -> str:
        await asyncio.sleep(seconds)
        return "slow answer"

    @server.tool(description="Reports progress, then answers")
    async def progress(steps: int, ctx: Context) -> str:
        for i in range(steps):
            await ctx.report_progress(i + 1, steps, f"step {i + 1}")
        return "done"

    @server.tool(description="Adds a tool, and says the tool list changed")
    async def grow(name: str, ctx: Context) -> str:
        def added() -> str:
            return f"added {name}"

        server.add_tool(added, name=f"added_{name}", description=f"Added at run time: {name}")
        await ctx.notify_tools_changed()  # 2026-07-28: to the subscriptions/listen streams
        try:  # the handshake revisions: a notification (on this request's stream)
            await ctx.request_context.session.send_tool_list_changed()
        except Exception:
            pass  # a 2026-07-28 session has no such notification
        return f"grew {name}"

    return server


class Counting:
    """ASGI wrapper: the header check (a 401 without the token) and the count of tools/call bodies."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.calls: list[str] = []  # each tools/call's tool name, as it reached the server
        self.headers: list[dict[str, str]] = []
        self.cancelled: list[bytes] = []  # notifications/cancelled bodies, and calls whose client hung up

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        self.headers.append(headers)
        if headers.get("x-files-token") != FILES_TOKEN:
            await send({"type": "http.response.start", "status": 401, "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": b"missing token"})
            return
        chunks: list[bytes] = []
        more = True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        if b'"tools/call"' in body:
            import json

            self.calls.append(json.loads(body).get("params", {}).get("name", ""))
        if b'"notifications/cancelled"' in body:
            self.cancelled.append(body)
        sent = False
        answered = False

        async def replay() -> Any:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            message = await receive()
            if message["type"] == "http.disconnect" and not answered and b'"tools/call"' in body:
                self.cancelled.append(b"hang-up: " + body)  # a 2026-07-28 client cancels by closing
            return message

        async def sending(message: Any) -> None:
            nonlocal answered
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                answered = True
            await send(message)

        await self.app(scope, replay, sending)
