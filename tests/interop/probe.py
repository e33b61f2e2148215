#!/usr/bin/env python3
"""Speak raw JSON-RPC over stdio to an MCP server: the survey behind
docs/interop.md and a debugging aid for tests/interop/servers_stdio.rs. Standard library only.

    probe.py [--era legacy|modern] [--env K=V ...] [--cwd DIR] [STEP ...] -- COMMAND ARGS...

STEP is one of
    survey                       discover (modern envelope), then initialize
                                 or stay modern, then list tools, resources,
                                 templates and prompts
    call:TOOL[:JSON]             tools/call with a progress token
    read:URI, subscribe:URI, prompt:NAME[:JSON], level:LEVEL
    raw:METHOD[:JSON]            any request
    send:METHOD[:JSON]           any request, without waiting for its answer
                                 (e.g. a subscriptions/listen stream)
    wait:SECONDS                 collect notifications for a while

Every frame in either direction is printed as one line of JSON, prefixed
with the milliseconds since the server was started and `>` (sent) or `<`
(received). Server-to-client requests are answered: `roots/list` with the
working directory, `sampling/createMessage` with a fixed text
("probe sampled: ..."), `elicitation/create` with `accept` and the schema's
defaults (or "probe" for strings), `ping` with {}. In the modern era an
`input_required` result is answered the same way and the request retried.
"""

import argparse
import json
import os
import queue
import subprocess
import sys
import threading
import time

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
CLIENT_INFO = {"name": "mcpvisor-probe", "version": "0.1"}
CAPABILITIES = {"roots": {"listChanged": True}, "sampling": {}, "elicitation": {"form": {}}}


class Peer:
    def __init__(self, command, env, cwd, quiet_stderr):
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=cwd,
            text=True,
            bufsize=1,
        )
        self.inbox = queue.Queue()
        self.next_id = 0
        self.era = None
        self.log_level = None
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._stderr, args=(quiet_stderr,), daemon=True).start()

    def ms(self):
        return int((time.monotonic() - self.started) * 1000)

    def _read(self):
        for line in self.proc.stdout:
            line = line.strip()
            if not line:
                continue
            try:
                self.inbox.put(json.loads(line))
            except ValueError:
                print(f"{self.ms():6d} ! not JSON on stdout: {line[:200]}")
        self.inbox.put(None)

    def _stderr(self, quiet):
        for line in self.proc.stderr:
            if not quiet:
                print(f"{self.ms():6d} ~ stderr: {line.rstrip()[:300]}")

    def send(self, frame):
        print(f"{self.ms():6d} > {json.dumps(frame)[:2000]}")
        self.proc.stdin.write(json.dumps(frame) + "\n")
        self.proc.stdin.flush()

    def envelope(self, params):
        params = dict(params or {})
        if self.era == "modern":
            meta = dict(params.get("_meta") or {})
            meta["io.modelcontextprotocol/protocolVersion"] = MODERN
            meta["io.modelcontextprotocol/clientInfo"] = CLIENT_INFO
            meta["io.modelcontextprotocol/clientCapabilities"] = CAPABILITIES
            if self.log_level:
                meta["io.modelcontextprotocol/logLevel"] = self.log_level
            params["_meta"] = meta
        return params

    def request(self, method, params=None, timeout=30.0, wrap=True):
        """Send a request; answer server requests meanwhile; return (message, ms)."""
        self.next_id += 1
        rid = self.next_id
        frame = {"jsonrpc": "2.0", "id": rid, "method": method}
        params = self.envelope(params) if wrap else params
        if params is not None:
            frame["params"] = params
        sent = time.monotonic()
        self.send(frame)
        deadline = sent + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                print(f"{self.ms():6d} ! no answer to {method} within {timeout}s")
                return None, None
            try:
                message = self.inbox.get(timeout=left)
            except queue.Empty:
                continue
            if message is None:
                print(f"{self.ms():6d} ! the server closed stdout (exit {self.proc.poll()})")
                return None, None
            print(f"{self.ms():6d} < {json.dumps(message)[:2000]}")
            if message.get("id") == rid and "method" not in message:
                elapsed = int((time.monotonic() - sent) * 1000)
                result = message.get("result")
                if self.era == "modern" and isinstance(result, dict) and result.get("resultType") == "input_required":
                    answers = {k: answer(v.get("method"), v.get("params")) for k, v in result.get("inputRequests", {}).items()}
                    retry = dict(params or {})
                    retry["inputResponses"] = answers
                    retry["requestState"] = result.get("requestState")
                    return self.request(method, retry, timeout, wrap=False)
                return message, elapsed
            if "method" in message and "id" in message:
                self.send({"jsonrpc": "2.0", "id": message["id"], "result": answer(message["method"], message.get("params"))})

    def notify(self, method, params=None):
        frame = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            frame["params"] = params
        self.send(frame)

    def drain(self, seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            try:
                message = self.inbox.get(timeout=max(0.01, end - time.monotonic()))
            except queue.Empty:
                continue
            if message is None:
                return
            print(f"{self.ms():6d} < {json.dumps(message)[:2000]}")
            if "method" in message and "id" in message:
                self.send({"jsonrpc": "2.0", "id": message["id"], "result": answer(message["method"], message.get("params"))})


def answer(method, params):
    params = params or {}
    if method == "roots/list":
        return {"roots": [{"uri": "file://" + os.getcwd(), "name": "cwd"}]}
    if method == "sampling/createMessage":
        asked = json.dumps(params.get("messages", []))[:120]
        return {"role": "assistant", "content": {"type": "text", "text": f"probe sampled: {asked}"}, "model": "probe", "stopReason": "endTurn"}
    if method == "elicitation/create":
        schema = params.get("requestedSchema") or {}
        content = {}
        for name, prop in (schema.get("properties") or {}).items():
            if "default" in prop:
                content[name] = prop["default"]
            elif prop.get("type") == "boolean":
                content[name] = True
            elif prop.get("type") in ("number", "integer"):
                content[name] = 1
            elif "enum" in prop:
                content[name] = prop["enum"][0]
            else:
                content[name] = "probe"
        return {"action": "accept", "content": content}
    return {}


def listing(peer, method, key):
    items, cursor, pages = [], None, 0
    while True:
        message, ms = peer.request(method, {"cursor": cursor} if cursor else {})
        if message is None or "error" in message:
            return None
        result = message["result"]
        items += result.get(key, [])
        pages += 1
        cursor = result.get("nextCursor")
        if not cursor:
            break
    print(f"# {method}: {len(items)} in {pages} page(s)")
    for item in items:
        required = (item.get("inputSchema") or {}).get("required") or [a["name"] for a in item.get("arguments", []) if a.get("required")]
        name = item.get("name") or item.get("uri")
        where = item.get("uri") or item.get("uriTemplate") or ""
        extra = {k: item[k] for k in ("execution", "annotations") if k in item}
        print(f"#   {name} {where} required={required} {json.dumps(extra) if extra else ''}".rstrip())
    return items


def survey(peer, era):
    if era == "modern":
        peer.era = "modern"
        message, ms = peer.request("server/discover", {}, timeout=10)
        print(f"# server/discover answered in {ms} ms: {json.dumps(message)[:600] if message else 'nothing'}")
        if message is None or "error" in message:
            peer.era = None
            era = "legacy"
    if era == "legacy":
        peer.era = "legacy"
        message, ms = peer.request(
            "initialize", {"protocolVersion": LEGACY, "capabilities": CAPABILITIES, "clientInfo": CLIENT_INFO}, timeout=30
        )
        if message is None or "error" in message:
            print(f"# initialize failed: {message}")
            return
        result = message["result"]
        print(f"# initialize answered in {ms} ms: version {result.get('protocolVersion')}, server {result.get('serverInfo')}")
        print(f"# capabilities: {json.dumps(result.get('capabilities'))}")
        peer.notify("notifications/initialized")
    listing(peer, "tools/list", "tools")
    listing(peer, "resources/list", "resources")
    listing(peer, "resources/templates/list", "resourceTemplates")
    listing(peer, "prompts/list", "prompts")


def split(step):
    head, _, rest = step.partition(":")
    return head, rest


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--era", choices=["legacy", "modern"], default="legacy")
    parser.add_argument("--env", action="append", default=[])
    parser.add_argument("--cwd")
    parser.add_argument("--quiet-stderr", action="store_true")
    parser.add_argument("rest", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    if "--" not in args.rest:
        parser.error("give the server's command after --")
    at = args.rest.index("--")
    steps, command = args.rest[:at], args.rest[at + 1 :]
    env = dict(os.environ)
    for pair in args.env:
        key, _, value = pair.partition("=")
        env[key] = value
    peer = Peer(command, env, args.cwd, args.quiet_stderr)
    if args.era == "modern":
        peer.era = "modern"  # every request carries the envelope until `survey` finds a legacy server
    token = 0
    for step in steps or ["survey"]:
        kind, rest = split(step)
        if kind == "survey":
            survey(peer, args.era)
        elif kind == "call":
            name, _, arguments = rest.partition(":")
            token += 1
            message, ms = peer.request(
                "tools/call", {"name": name, "arguments": json.loads(arguments or "{}"), "_meta": {"progressToken": f"p{token}"}}, timeout=120
            )
            print(f"# tools/call {name} answered in {ms} ms")
        elif kind == "read":
            peer.request("resources/read", {"uri": rest})
        elif kind == "subscribe":
            peer.request("resources/subscribe", {"uri": rest})
        elif kind == "prompt":
            name, _, arguments = rest.partition(":")
            peer.request("prompts/get", {"name": name, "arguments": json.loads(arguments or "{}")})
        elif kind == "level":
            if peer.era == "modern":
                peer.log_level = rest
            else:
                peer.request("logging/setLevel", {"level": rest})
        elif kind == "raw":
            method, _, params = rest.partition(":")
            peer.request(method, json.loads(params or "{}"))
        elif kind == "send":
            method, _, params = rest.partition(":")
            peer.next_id += 1
            peer.send({"jsonrpc": "2.0", "id": peer.next_id, "method": method, "params": peer.envelope(json.loads(params or "{}"))})
        elif kind == "wait":
            peer.drain(float(rest))
        else:
            parser.error(f"unknown step {step}")
    peer.proc.stdin.close()
    try:
        peer.proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        peer.proc.kill()


if __name__ == "__main__":
    main()
