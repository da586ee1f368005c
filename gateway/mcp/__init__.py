"""The MCP gateway (docs/mcp.md): the tools of the [[mcp_servers]] behind /mcp, per key, accounted."""
