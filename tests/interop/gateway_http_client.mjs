// The TypeScript SDK client against `mcpvisor serve --http` in front of the
// demo server: Streamable HTTP (tools, progress, sampling) and the legacy
// HTTP+SSE transport. Prints one JSON line per check, exits 1 at the first
// failure.
//
//     node gateway_http_client.mjs BASE_URL SDK_DIR
//
// BASE_URL is http://HOST:PORT; SDK_DIR is the @modelcontextprotocol/sdk package directory.

const [base, sdk] = process.argv.slice(2);
const { Client } = await import(`${sdk}/dist/esm/client/index.js`);
const { StreamableHTTPClientTransport } = await import(`${sdk}/dist/esm/client/streamableHttp.js`);
const { SSEClientTransport } = await import(`${sdk}/dist/esm/client/sse.js`);
const { CreateMessageRequestSchema } = await import(`${sdk}/dist/esm/types.js`);

function check(name, ok, detail = "") {
  console.log(JSON.stringify({ check: name, ok: Boolean(ok), detail: JSON.stringify(detail).slice(0, 300) }));
  if (!ok) process.exit(1);
}

async function run(label, transport) {
  const client = new Client({ name: "ts-gateway-test", version: "1.0.0" }, { capabilities: { sampling: {} } });
  client.setRequestHandler(CreateMessageRequestSchema, async () => ({
    role: "assistant", model: "ts-test", content: { type: "text", text: "sampled by typescript" },
  }));
  await client.connect(transport);
  const tools = await client.listTools();
  check(`${label}: tools listed`, tools.tools.some((tool) => tool.name === "demo__echo"));
  const echo = await client.callTool({ name: "demo__echo", arguments: { text: `hello ${label}` } });
  check(`${label}: echo`, echo.content[0].text === `hello ${label}`, echo);
  // The progress as the SDK's transport receives it: the SDK runs
  // notification handlers a tick after the messages arrive and drops a
  // request's progress handler when its answer arrives, so on a loaded
  // machine its callback can miss every step even though all three came
  // (tests/gateway/gateway_http.rs checks that every step goes out).
  const progress = [];
  const receive = transport.onmessage;
  transport.onmessage = (message, extra) => {
    if (message.method === "notifications/progress") progress.push(message.params.progress);
    receive(message, extra);
  };
  await client.callTool({ name: "demo__progress", arguments: { steps: 3, ms: 1 } }, undefined, { onprogress: () => {} });
  transport.onmessage = receive;
  check(`${label}: progress`, progress.length >= 1 && progress[0] === 1, progress);
  const sample = await client.callTool({ name: "demo__sample", arguments: { prompt: "hi" } });
  check(`${label}: sampling round trip`, JSON.stringify(sample.content).includes("sampled by typescript"), sample);
  // End the session (DELETE) rather than let it idle: the gateway puts a
  // server's sampling request to a session whose client offers sampling.
  if (transport.terminateSession) await transport.terminateSession();
  await client.close();
}

await run("streamable-http", new StreamableHTTPClientTransport(new URL(`${base}/mcp`)));
await run("sse", new SSEClientTransport(new URL(`${base}/sse`)));
process.exit(0);
