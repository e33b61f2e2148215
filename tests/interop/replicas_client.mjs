// The TypeScript SDK client through nginx in front of replicas of
// `mcpvisor serve --http` (tests/interop/gateway_replicas.rs): SESSIONS
// Streamable HTTP sessions and one HTTP+SSE session (its POSTs name the
// session in ?sessionId=, which nginx routes on). Then it prints
// {"phase":"ready"} and waits for a line on stdin while the test kills a
// replica; then every Streamable HTTP session is used again. A session
// whose replica died answers 404, which this SDK throws as a
// StreamableHTTPError with code 404 and does not act on: as the
// specification asks of a client, a new session is initialized (nginx places
// it on a live replica). Prints one JSON line per check, then
// {"reinitialized":N}; exits 1 at the first failure.
//
//     node replicas_client.mjs BASE_URL SDK_DIR SESSIONS

import { createInterface } from "node:readline";

const [base, sdk, count] = process.argv.slice(2);
const { Client } = await import(`${sdk}/dist/esm/client/index.js`);
const { StreamableHTTPClientTransport, StreamableHTTPError } = await import(`${sdk}/dist/esm/client/streamableHttp.js`);
const { SSEClientTransport } = await import(`${sdk}/dist/esm/client/sse.js`);

function check(name, ok, detail = "") {
  console.log(JSON.stringify({ check: name, ok: Boolean(ok), detail: JSON.stringify(detail).slice(0, 300) }));
  if (!ok) process.exit(1);
}

async function connect(transport) {
  const client = new Client({ name: "ts-replicas-test", version: "1.0.0" });
  // A dead replica's GET stream fails too; the calls below report it.
  client.onerror = () => {};
  await client.connect(transport);
  return client;
}

const openSession = () => connect(new StreamableHTTPClientTransport(new URL(`${base}/mcp`)));

async function echo(client, text) {
  const answer = await client.callTool({ name: "demo__echo", arguments: { text } });
  return answer.content[0].text;
}

const sessions = [];
for (let index = 0; index < Number(count); index++) sessions.push(await openSession());
for (const [index, session] of sessions.entries()) {
  check(`streamable ${index}: echo`, (await echo(session, `before ${index}`)) === `before ${index}`);
}
const sse = await connect(new SSEClientTransport(new URL(`${base}/sse`)));
check("sse: echo", (await echo(sse, "over sse")) === "over sse");
await sse.close();

console.log(JSON.stringify({ phase: "ready" }));
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const go = await lines.next();
check("the test said go", go.value === "go", go);

let reinitialized = 0;
for (const [index, session] of sessions.entries()) {
  const text = `after ${index}`;
  let answer;
  try {
    answer = await echo(session, text);
  } catch (error) {
    check(`streamable ${index}: a dead replica's session is unknown`, error instanceof StreamableHTTPError && error.code === 404, String(error));
    reinitialized += 1;
    answer = await echo(await openSession(), text);
  }
  check(`streamable ${index}: echo after the kill`, answer === text, answer);
}
console.log(JSON.stringify({ reinitialized }));
process.exit(0);
