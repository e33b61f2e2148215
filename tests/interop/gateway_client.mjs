// The TypeScript SDK client (@modelcontextprotocol/sdk) against `mcpvisor serve`.
//
// Usage: node gateway_client.mjs SDK_DIR MCPVISOR CONFIG
//
// SDK_DIR is the package's directory (…/node_modules/@modelcontextprotocol/sdk).
// CONFIG serves two demo servers, `demo` and `other`. Every check throws on
// failure; the last line printed is `ok N checks`. Run by tests/interop/gateway_stdio.rs.

import { pathToFileURL } from "node:url";
import path from "node:path";

const [sdk, binary, config] = process.argv.slice(2);
const load = (file) => import(pathToFileURL(path.join(sdk, "dist/esm", file)).href);
const { Client } = await load("client/index.js");
const { StdioClientTransport } = await load("client/stdio.js");
const types = await load("types.js");

let checks = 0;
function check(condition, what) {
  if (!condition) throw new Error(`failed: ${what}`);
  checks += 1;
  console.log(`ok: ${what}`);
}
const text = (result) => result.content.filter((block) => block.type === "text").map((block) => block.text).join("");
const until = async (condition) => {
  for (;;) {
    if (await condition()) return;
    await new Promise((resolve) => setImmediate(resolve));
  }
};

const client = new Client({ name: "ts-test", version: "1" }, { capabilities: { sampling: {}, elicitation: {}, roots: {} } });
client.setRequestHandler(types.CreateMessageRequestSchema, async (request) => ({
  role: "assistant",
  content: { type: "text", text: `ts model: ${request.params.messages[0].content.text}` },
  model: "ts",
}));
client.setRequestHandler(types.ElicitRequestSchema, async () => ({ action: "accept", content: { name: "Linus" } }));
client.setRequestHandler(types.ListRootsRequestSchema, async () => ({ roots: [{ uri: "file:///ts/root", name: "root" }] }));
const heard = [];
client.setNotificationHandler(types.ResourceUpdatedNotificationSchema, async (n) => heard.push(n));
client.setNotificationHandler(types.ToolListChangedNotificationSchema, async (n) => heard.push(n));
client.setNotificationHandler(types.LoggingMessageNotificationSchema, async (n) => heard.push(n));

const transport = new StdioClientTransport({ command: binary, args: ["--config", config, "serve"], stderr: "inherit" });
await client.connect(transport);
// The wire as the SDK receives it: the SDK runs notification handlers a
// microtask late, so the progress sent just before a response reaches its
// callback after the response removed it (and is reported as unknown).
const wire = [];
const receive = transport.onmessage;
transport.onmessage = (message, extra) => {
  wire.push(message);
  receive(message, extra);
};
check(client.getServerVersion().name === "mcpvisor", "initialize names the gateway");

const names = (await client.listTools()).tools.map((tool) => tool.name);
check(names.includes("demo__echo") && names.includes("other__echo"), "tools are served as {server}__{name}");
check(text(await client.callTool({ name: "other__echo", arguments: { text: "hi" } })) === "hi", "a tool call goes through");

const steps = [];
wire.length = 0;
const done = await client.callTool({ name: "demo__progress", arguments: { steps: 3, ms: 20 } }, undefined, { onprogress: (p) => steps.push(p.progress) });
// Other notifications may come in between (the catalog's list_changed
// once the servers are up): only the order of progress and response counts.
const ordered = wire.filter((m) => m.method === "notifications/progress" || m.result !== undefined);
const progress = ordered.filter((m) => m.method).map((m) => m.params.progress);
const answered = ordered.findIndex((m) => m.result !== undefined);
check(text(done) === "done 3 steps" && steps.length >= 2, `progress reaches the client's callback (${steps})`);
check(JSON.stringify(progress) === "[1,2,3]" && answered === 3, `every progress step comes before the response (${progress})`);

const prompt = await client.getPrompt({ name: "demo__greet", arguments: { name: "Ada" } });
check(prompt.messages[0].content.text.includes("Ada"), "a prompt is filled in");
const completion = await client.complete({ ref: { type: "ref/prompt", name: "demo__greet" }, argument: { name: "style", value: "pi" } });
check(JSON.stringify(completion.completion.values) === '["pirate"]', "completion is routed by the prompt");

const status = async () => Object.fromEntries(JSON.parse((await client.readResource({ uri: "mcpvisor://status" })).contents[0].text).map((s) => [s.name, s]));
await client.subscribeResource({ uri: "demo://counter" });
await client.callTool({ name: "demo__touch", arguments: {} });
await until(() => heard.some((n) => n.method === "notifications/resources/updated"));
check(heard.find((n) => n.method === "notifications/resources/updated").params.uri === "demo://counter", "a subscribed resource's update is forwarded");

await client.setLoggingLevel("debug");
await client.callTool({ name: "demo__log", arguments: { level: "warning", message: "careful" } });
await until(() => heard.some((n) => n.method === "notifications/message" && JSON.stringify(n.params.data).includes("careful")));
const log = heard.find((n) => n.method === "notifications/message" && JSON.stringify(n.params.data).includes("careful"));
check(log.params.logger === "demo", "log messages carry the server's name as logger");

check(text(await client.callTool({ name: "demo__sample", arguments: { prompt: "hello" } })).includes("ts model: hello"), "sampling round trip");
const elicited = text(await client.callTool({ name: "demo__elicit", arguments: { message: "Your name?" } }));
check(elicited.includes("accept") && elicited.includes("Linus"), "elicitation round trip");
check(text(await client.callTool({ name: "demo__roots", arguments: {} })).includes("file:///ts/root"), "roots round trip");

let unknown;
try {
  await client.callTool({ name: "demo__nope", arguments: {} });
} catch (error) {
  unknown = error;
}
check(unknown && String(unknown.message).includes("demo__nope"), `an unknown tool is a JSON-RPC error naming it (${unknown})`);

const abort = new AbortController();
const slow = client.callTool({ name: "demo__sleep", arguments: { ms: 600000 } }, undefined, { signal: abort.signal }).catch((e) => e);
await until(async () => (await status()).demo.in_flight >= 1);
abort.abort("changed my mind");
await slow;
let cancelled = [];
await until(async () => {
  const received = await client.callTool({ name: "demo__cancellations", arguments: {} });
  cancelled = received.structuredContent?.cancellations ?? [];
  return cancelled.some((entry) => entry.tool === "sleep");
});
check(cancelled.some((entry) => entry.arguments?.ms === 600000), "cancellation reaches the upstream call");

heard.length = 0;
process.kill((await status()).other.pid, "SIGKILL");
await until(() => heard.some((n) => n.method === "notifications/tools/list_changed"));
check(text(await client.callTool({ name: "other__echo", arguments: { text: "back" } })) === "back", "list_changed after a SIGKILL, then served again");

await client.close();
console.log(`ok ${checks} checks`);
