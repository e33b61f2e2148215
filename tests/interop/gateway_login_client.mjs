// The TypeScript SDK client logging in to a third-party server through
// `mcpvisor serve --http` (a per-caller login, URL-mode elicitation of MCP
// 2025-11-25): its first call fails with UrlElicitationRequiredError, the
// URL is followed (the third party approves without a person), the
// session hears notifications/elicitation/complete, and the call goes
// through as the caller's login. Prints one JSON line per check, exits 1
// at the first failure.
//
//     node gateway_login_client.mjs BASE_URL KEY SDK_DIR USER
//
// KEY is the caller's named key; USER is whom the third party approves as.

const [base, key, sdk, user] = process.argv.slice(2);
const { Client } = await import(`${sdk}/dist/esm/client/index.js`);
const { StreamableHTTPClientTransport } = await import(`${sdk}/dist/esm/client/streamableHttp.js`);
const { UrlElicitationRequiredError, ElicitationCompleteNotificationSchema } = await import(`${sdk}/dist/esm/types.js`);

function check(name, ok, detail = "") {
  console.log(JSON.stringify({ check: name, ok: Boolean(ok), detail: JSON.stringify(detail).slice(0, 300) }));
  if (!ok) process.exit(1);
}

const client = new Client({ name: "ts-login-test", version: "1.0.0" }, { capabilities: { elicitation: { url: {} } } });
let completed;
const complete = new Promise((resolve) => { completed = resolve; });
client.setNotificationHandler(ElicitationCompleteNotificationSchema, (notification) => completed(notification.params.elicitationId));
const transport = new StreamableHTTPClientTransport(new URL(`${base}/mcp`), {
  requestInit: { headers: { Authorization: `Bearer ${key}` } },
});
await client.connect(transport);

// The catalog is listed by the gateway's own connection: wait for it (a bounded poll).
const deadline = Date.now() + 30_000;
for (;;) {
  const tools = await client.listTools();
  if (tools.tools.some((tool) => tool.name === "gh__whoami")) break;
  check("gh's tools are listed within 30 s", Date.now() < deadline, tools);
  await new Promise((resolve) => setTimeout(resolve, 50));
}

let elicitation;
try {
  const answer = await client.callTool({ name: "gh__whoami", arguments: {} });
  check("the first call asks for a login", false, answer);
} catch (error) {
  check("the first call fails with UrlElicitationRequiredError", error instanceof UrlElicitationRequiredError, String(error));
  elicitation = error.elicitations[0];
  check("the elicitation is a URL of the gateway", elicitation.mode === "url" && elicitation.url.startsWith(`${base}/login/`), elicitation);
  check("the message says where to log in", error.message.includes(elicitation.url) && error.message.includes("gh"), error.message);
}

const page = await fetch(elicitation.url, { redirect: "follow" });
const text = await page.text();
check("following the URL logs in", page.status === 200 && text.includes("Logged in to gh"), text);

const timeout = new Promise((resolve) => setTimeout(() => resolve("no notification within 20 s"), 20_000));
const heard = await Promise.race([complete, timeout]);
check("notifications/elicitation/complete names the elicitation", heard === elicitation.elicitationId, heard);

const answer = await client.callTool({ name: "gh__whoami", arguments: {} });
const seen = JSON.parse(answer.content[0].text);
check("the call goes through as the caller's login", seen.sub === user, seen);

if (transport.terminateSession) await transport.terminateSession();
await client.close();
process.exit(0);
