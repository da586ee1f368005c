"""A handshake-only MCP server over stdio, written against the wire (no SDK): many servers in use
today speak only the ``initialize`` revisions. It answers ``server/discover`` with -32601 (so a
client falls back to the handshake), serves ``tools/list`` and ``tools/call``; its tool ``grow``
adds the tool ``added`` and sends ``notifications/tools/list_changed``, as such a server does."""

import json
import sys

SCHEMA = {"type": "object", "properties": {}}
tools = [{"name": "grow", "description": "Adds a tool and says the list changed", "inputSchema": SCHEMA}]


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def answer(request: dict) -> dict:
    method, params = request.get("method"), request.get("params") or {}
    if method == "initialize":
        return {"protocolVersion": "2025-06-18", "capabilities": {"tools": {"listChanged": True}},
                "serverInfo": {"name": "handshake", "version": "1"}}  # fmt: skip
    if method == "ping":
        return {}
    if method == "tools/list":
        return {"tools": tools}
    if method == "tools/call" and params.get("name") == "grow":
        if not any(t["name"] == "added" for t in tools):
            tools.append({"name": "added", "description": "Added at run time", "inputSchema": SCHEMA})
        send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        return {"content": [{"type": "text", "text": "grew"}]}
    if method == "tools/call" and params.get("name") == "added":
        return {"content": [{"type": "text", "text": "added"}]}
    raise LookupError(method)


for line in sys.stdin:
    request = json.loads(line)
    if "id" not in request or "method" not in request:
        continue  # a notification, or a response
    try:
        send({"jsonrpc": "2.0", "id": request["id"], "result": answer(request)})
    except LookupError as exc:
        send({"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32601, "message": f"no method {exc}"}})
