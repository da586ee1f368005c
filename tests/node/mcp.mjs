// The official TypeScript MCP SDK (@modelcontextprotocol/sdk) against the gateway's /mcp:
// node mcp.mjs <gateway url> <caller key>. Prints one JSON object: what the client saw.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, key] = process.argv.slice(2);
const transport = new StreamableHTTPClientTransport(new URL(`${url}/mcp`), {
  requestInit: { headers: { Authorization: `Bearer ${key}` } },
});
const client = new Client({ name: "gateway-node-mcp", version: "1.0.0" });
await client.connect(transport);
const out = { protocolVersion: transport.protocolVersion, server: client.getServerVersion()?.name };
out.tools = (await client.listTools()).tools.map((t) => t.name);
out.add = await client.callTool({ name: "calc_add", arguments: { a: 20, b: 22 } });
out.read = await client.callTool({ name: "files_read_file", arguments: { path: "node/text" } });
out.fail = await client.callTool({ name: "files_fail", arguments: { reason: "node" } });
try {
  await client.callTool({ name: "files_delete_file", arguments: { path: "/" } });
  out.forbidden = "answered";
} catch (err) {
  out.forbidden = { code: err.code, message: err.message };
}
await client.close();
console.log(JSON.stringify(out));
