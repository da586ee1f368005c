"""An MCP server over stdio (the official SDK's ``MCPServer``), started by the gateway as ``command``.

Tools: ``add`` (structured: ``{"result": a + b}``), ``pid`` (this process's id: a test kills it to
see the gateway start it again), ``env`` (the value of an environment variable the gateway passed)."""

import os

from mcp.server.mcpserver import MCPServer

server = MCPServer("calc")


@server.tool(description="Add two numbers")
def add(a: int, b: int) -> dict[str, int]:
    return {"result": a + b}


@server.tool(description="The server's process id")
def pid() -> int:
    return os.getpid()


@server.tool(description="An environment variable's value")
def env(name: str) -> str:
    return os.environ.get(name, "")


if __name__ == "__main__":
    server.run("stdio")
