// The client side of .ci/acp-sdk-smoke: the official SDK drives `mcpvisor acp`.
// Usage: node smoke.mjs MCPVISOR_BINARY PROJECT_DIR
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import { client, ndJsonStream } from "@agentclientprotocol/sdk";

const [bin, project] = process.argv.slice(2);
const agent = spawn(bin, ["acp"], { cwd: project, stdio: ["pipe", "pipe", "inherit"] });
const stream = ndJsonStream(Writable.toWeb(agent.stdin), Readable.toWeb(agent.stdout));
const updates = [];
const app = client({ name: "mcpvisor-ci" })
  .onNotification("session/update", (notification) => {
    updates.push(notification.update ?? notification.params?.update ?? notification);
  })
  .onRequest("session/request_permission", () => ({ outcome: { outcome: "selected", optionId: "allow_once" } }));

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
  return answer;
});
agent.stdin.end();
if (result.stopReason !== "end_turn") fail(`stop reason ${result.stopReason}`);
const text = updates.filter((u) => u.sessionUpdate === "agent_message_chunk").map((u) => u.content.text).join("");
if (!text.includes("answered: 5")) fail(`the answer was ${JSON.stringify(text)}`);
if (!updates.some((u) => u.sessionUpdate === "tool_call_update" && u.status === "completed")) fail("no completed tool call");
const code = await new Promise((resolve) => agent.on("exit", resolve));
if (code !== 0) fail(`mcpvisor acp exited with ${code}`);
console.log(`acp smoke: ok (${updates.length} updates, answer ${JSON.stringify(text)})`);
