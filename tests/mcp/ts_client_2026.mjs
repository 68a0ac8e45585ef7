// The official TypeScript SDK client (npm `@modelcontextprotocol/client` 2.x)
// against capsaga on the stateless MCP 2026-07-28 revision (issue 26).
//
// usage: node ts_client_2026.mjs URL WRITE_PATH TOKEN   (NODE_PATH: the
// node_modules holding the SDK, as scripts/mcp-clients installs it)
//
// Connects with the SDK's `auto` version negotiation (it probes
// `server/discover` and speaks the newest revision both sides support),
// lists the tools, calls `time_now`, reads the saga of that call as a
// resource, and calls `fs_write`, which the test's policy makes wait for an
// operator's approval; prints one JSON document of what it saw on stdout.
import { createRequire } from "node:module";
import path from "node:path";

const require = createRequire(path.join(process.env.NODE_PATH ?? ".", "x.js"));
const { Client, StreamableHTTPClientTransport } = require("@modelcontextprotocol/client");

const [url, writePath, token] = process.argv.slice(2);

function dump(result) {
  return {
    is_error: Boolean(result.isError),
    text: (result.content ?? []).map((c) => c.text ?? "").join(""),
    structured: result.structuredContent ?? null,
  };
}

const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const client = new Client(
  { name: "capsaga-ts-interop", version: "1.0.0" },
  { versionNegotiation: { mode: "auto" } },
);
await client.connect(transport);
const seen = {};
seen.protocol_version = client.getNegotiatedProtocolVersion() ?? null;
seen.tools = (await client.listTools()).tools.map((t) => t.name).sort();
seen.time_now = dump(await client.callTool({ name: "time_now", arguments: {} }));
const saga = seen.time_now.structured?.saga_id;
const read = await client.readResource({ uri: `capsaga://sagas/${saga}` });
seen.resource = JSON.parse(read.contents[0].text);
seen.approval = dump(
  await client.callTool({ name: "fs_write", arguments: { path: writePath, content: "ts\n" } }),
);
await client.close();
console.log(JSON.stringify(seen));
