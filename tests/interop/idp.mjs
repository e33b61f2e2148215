// A real OAuth 2 / OIDC identity provider for tests/interop/gateway_auth.rs:
// oauth2-mock-server (npm) on 127.0.0.1:PORT, with RS256 keys it signs
// tokens with and serves as its JWKS. A few routes under /test shape tokens
// the way the tests need them:
//
//   POST /test/mint   {claims, expiresIn?, foreign?}  -> {token}
//        claims are merged over iss/iat/exp/nbf; `foreign` signs with a key
//        this provider never publishes; the current key signs otherwise
//   POST /test/rotate                                   -> {kid}
//        adds a new key to the JWKS and signs with it from now on
//   POST /test/opaque {token, claims}                   -> {}
//        registers an opaque token: introspection (RFC 7662, at
//        /test/introspect, which the metadata names; for the client
//        introspector:intro-s3cret only, else 401) says it is active with
//        these claims; any other token is inactive
//   GET  /test/introspections                           -> {count}
//        how often /test/introspect was asked
//   GET  /test/jwks-fetches                             -> {count}
//        how often the JWKS was fetched (the discovery documents point
//        jwks_uri at /test/jwks, which counts)
//
// Client-credentials tokens from /token get sub = client_id = the client's
// id and aud = the RFC 8707 `resource` it asked for, as real providers do.
//
// Usage: node idp.mjs PORT MODULE_DIR  (MODULE_DIR: where node_modules/oauth2-mock-server is)
import { pathToFileURL } from "node:url";
import path from "node:path";

const [port, moduleDir] = process.argv.slice(2);
const { OAuth2Server, OAuth2Issuer, Events } = await import(
  pathToFileURL(path.join(moduleDir, "node_modules/oauth2-mock-server/dist/index.mjs")).href
);

const server = new OAuth2Server();
let current = (await server.issuer.keys.generate("RS256", { kid: "key-1" })).kid;
let fetches = 0;

// A second issuer whose key is never in the JWKS: tokens it signs name the real issuer.
const stranger = new OAuth2Issuer();
await stranger.keys.generate("RS256", { kid: "unknown-key" });

const send = (res, status, body) => {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
};

const service = server.service;
service.on(Events.BeforeWellKnownOpenIdConfiguration, (response) => {
  response.body.jwks_uri = `${server.issuer.url}/test/jwks`;
  response.body.introspection_endpoint = `${server.issuer.url}/test/introspect`;
  // Confidential clients authenticate with their secret (the mock accepts any).
  response.body.token_endpoint_auth_methods_supported = ["client_secret_basic", "client_secret_post", "none"];
});
service.on(Events.BeforeTokenSigning, (token, req) => {
  const body = req.body ?? {};
  if (body.grant_type !== "client_credentials") return;
  const basic = (req.headers.authorization ?? "").replace(/^Basic /, "");
  const client = basic ? decodeURIComponent(Buffer.from(basic, "base64").toString().split(":")[0]) : body.client_id;
  token.payload.sub = client;
  token.payload.client_id = client;
  if (body.resource) token.payload.aud = body.resource;
});
// The metadata of RFC 8414 too, the same document (mcpvisor's OAuth client asks it first).
service.addRoute("GET", "/.well-known/oauth-authorization-server", async (req, res) => {
  const answer = await fetch(`${server.issuer.url}/.well-known/openid-configuration`);
  send(res, 200, await answer.json());
});
service.addRoute("GET", "/test/jwks", (req, res) => {
  fetches += 1;
  send(res, 200, { keys: server.issuer.keys.toJSON() });
});
service.addRoute("GET", "/test/jwks-fetches", (req, res) => send(res, 200, { count: fetches }));
service.addRoute("POST", "/test/rotate", async (req, res) => {
  current = (await server.issuer.keys.generate("RS256", { kid: `key-${Date.now()}` })).kid;
  send(res, 200, { kid: current });
});
service.addRoute("POST", "/test/mint", async (req, res) => {
  const { claims = {}, expiresIn = 600, foreign = false } = req.body ?? {};
  const issuer = foreign ? stranger : server.issuer;
  issuer.url = server.issuer.url;
  const token = await issuer.buildToken({
    kid: foreign ? "unknown-key" : current,
    expiresIn,
    scopesOrTransform: (header, payload) => Object.assign(payload, claims),
  });
  send(res, 200, { token });
});

const opaque = new Map();
service.addRoute("POST", "/test/opaque", (req, res) => {
  opaque.set(req.body.token, req.body.claims);
  send(res, 200, {});
});
// The mock's own /introspect reads no request body (it answers every token
// active), so the metadata points at this one, which reads the form.
let introspections = 0;
service.addRoute("GET", "/test/introspections", (req, res) => send(res, 200, { count: introspections }));
service.addRoute("POST", "/test/introspect", (req, res) => {
  introspections += 1;
  const expected = "Basic " + Buffer.from("introspector:intro-s3cret").toString("base64");
  if (req.headers.authorization !== expected) return send(res, 401, { error: "invalid_client" });
  const claims = opaque.get(req.body?.token);
  send(res, 200, claims ? { active: true, ...claims } : { active: false });
});

await server.start(Number(port), "127.0.0.1");
// The issuer as the tests reach it (the mock would say localhost).
server.issuer.url = `http://127.0.0.1:${server.address().port}`;
console.error(`idp ready at ${server.issuer.url}`);
