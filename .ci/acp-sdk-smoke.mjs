// The client side of .ci/acp-sdk-smoke: the official SDK drives `mcpvisor acp`.
// Usage: node smoke.mjs MCPVISOR_BINARY PROJECT_DIR
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import { client, ndJsonStream } from "@agentclientprotocol/sdk";

const [bin, project] = process.argv.slice(2);
const agent = spawn(bin, ["acp"], { cwd: project, stdio: ["pipe", "pipe", "inherit"] });
const stream = ndJsonStream(Writable.toWeb(agent.stdin), Readable.toWeb(agent.stdout));
// The agent's lines as written, beside what the SDK makes of them.
const wire = [];
let partial = "";
agent.stdout.on("data", (chunk) => {
  const lines = (partial + chunk.toString("utf8")).split("\n");
  partial = lines.pop();
  wire.push(...lines.filter((line) => line.trim()).map((line) => JSON.parse(line)));
});
const updates = [];
const questions = [];
const app = client({ name: "mcpvisor-ci" })
  .onNotification("session/update", (notification) => {
    updates.push(notification.update ?? notification.params?.update ?? notification);
  })
  .onRequest("session/request_permission", (request) => {
    // What the editor knows when it must ask the user.
    questions.push({ request: request.params ?? request, seen: updates.length });
    return { outcome: { outcome: "selected", optionId: "allow_once" } };
  });

const fail = (message) => {
  console.error(`acp smoke: ${message}\nupdates: ${JSON.stringify(updates, null, 1)}`);
  agent.kill();
  process.exit(1);
};

const result = await app.connectWith(stream, async (ctx) => {
  const init = await ctx.request("initialize", {
    protocolVersion: 1,
    clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
  });
  if (init.protocolVersion !== 1 || init.agentCapabilities?.loadSession !== true) fail(`initialize: ${JSON.stringify(init)}`);
  const session = await ctx.request("session/new", {
    cwd: project,
    mcpServers: [{ name: "demo", command: bin, args: ["demo-server"], env: [] }],
  });
  const answer = await ctx.request("session/prompt", {
    sessionId: session.sessionId,
    prompt: [{ type: "text", text: "add 2 and 3" }],
  });
  // The built-in write_file asks first (mode ask; it is not read-only); so did the untrusted demo server's add.
  const written = await ctx.request("session/prompt", {
    sessionId: session.sessionId,
    prompt: [{ type: "text", text: "write_file notes.txt" }],
  });
  if (written.stopReason !== "end_turn") fail(`write_file: stop reason ${written.stopReason}`);
  return answer;
});
agent.stdin.end();
if (result.stopReason !== "end_turn") fail(`stop reason ${result.stopReason}`);
const text = updates.filter((u) => u.sessionUpdate === "agent_message_chunk").map((u) => u.content.text).join("");
if (!text.includes("answered: 5")) fail(`the answer was ${JSON.stringify(text)}`);
if (!updates.some((u) => u.sessionUpdate === "tool_call_update" && u.status === "completed")) fail("no completed tool call");
// Both calls ask in mode ask: the demo server is not trusted, so its add's
// readOnlyHint is a claim, not a permission; write_file is not read-only.
// Each question follows the text and the tool_call it is about, and names the call.
const file = `${project}/notes.txt`;
const askedAt = wire.flatMap((m, i) => (m.method === "session/request_permission" ? [i] : []));
if (askedAt.length !== 2 || questions.length !== 2) fail(`two permission questions expected (add, then write_file): ${JSON.stringify(wire)}`);
askedAt.forEach((asked, k) => {
  const { toolCall } = wire[asked].params;
  const announced = wire.findIndex((m) => m.params?.update?.sessionUpdate === "tool_call" && m.params.update.toolCallId === toolCall.toolCallId);
  if (announced < 0 || announced > asked) fail(`the tool_call came after the question: ${JSON.stringify(wire)}`);
  const known = updates.slice(0, questions[k].seen);
  if (!known.some((u) => u.sessionUpdate === "tool_call" && u.toolCallId === toolCall.toolCallId)) fail("the SDK delivered a question before its tool_call");
});
const [first, second] = askedAt.map((asked) => wire[asked].params.toolCall);
if (first.title !== "Add (demo)" || first.kind !== "read") fail(`the first question's toolCall: ${JSON.stringify(first)}`);
const said = wire.slice(0, askedAt[1]).filter((m) => m.params?.update?.sessionUpdate === "agent_message_chunk").map((m) => m.params.update.content.text).join("");
if (!said.endsWith("I will call `mcp__builtin_s1__write_file`.")) fail(`the text before the question: ${JSON.stringify(said)}`);
if (second.title !== `Write ${file}` || second.kind !== "edit" || second.locations?.[0]?.path !== file) fail(`the second question's toolCall: ${JSON.stringify(second)}`);
const code = await new Promise((resolve) => agent.on("exit", resolve));
if (code !== 0) fail(`mcpvisor acp exited with ${code}`);
console.log(`acp smoke: ok (${updates.length} updates, answer ${JSON.stringify(text)}; each permission question followed its tool_call and named it)`);
