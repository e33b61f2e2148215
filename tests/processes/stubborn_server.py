"""A misbehaving MCP server over stdio (legacy handshake), standard library
only: the process tests' fixture.

Usage: stubborn_server.py DIR [--ignore-term] [--ignore-eof]

- writes its pid to DIR/server.pid once it serves;
- `--ignore-term`: ignores SIGTERM; `--ignore-eof`: keeps running after
  stdin closes (together: only SIGKILL ends it);
- tool `spawn_detached`: forks a child that calls setsid() (leaving the
  server's process group) and sleeps an hour; its pid goes to
  DIR/detached.pid and into the answer;
- tool `hang`: writes DIR/hanging, then never answers;
- `--odd-tools`: also lists `x.y`, `x_y` twice and a tool with an empty
  name (names that read alike, a duplicate, an empty name).
"""

import json
import os
import signal
import sys
import time

DIR = sys.argv[1]
FLAGS = sys.argv[2:]

TOOLS = [
    {"name": name, "description": name, "inputSchema": {"type": "object", "properties": {}}}
    for name in ("spawn_detached", "hang") + (("x.y", "x_y", "x_y", "") if "--odd-tools" in FLAGS else ())
]


def write(path, text):
    with open(os.path.join(DIR, path + ".tmp"), "w") as f:
        f.write(text)
    os.replace(os.path.join(DIR, path + ".tmp"), os.path.join(DIR, path))


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def spawn_detached():
    pid = os.fork()
    if pid == 0:
        os.setsid()
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        os.execvp("sleep", ["sleep", "3600"])
    write("detached.pid", str(pid))
    return pid


def answer(request):
    method, rid = request.get("method"), request.get("id")
    if rid is None:
        return
    if method == "initialize":
        result = {
            "protocolVersion": request["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "stubborn", "version": "1"},
        }
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "tools/call" and request["params"]["name"] == "spawn_detached":
        pid = spawn_detached()
        result = {"content": [{"type": "text", "text": f"detached pid {pid}"}], "structuredContent": {"pid": pid}}
    elif method == "tools/call" and request["params"]["name"] == "hang":
        write("hanging", "")
        return
    elif method == "ping":
        result = {}
    else:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"no method {method}"}})
        return
    send({"jsonrpc": "2.0", "id": rid, "result": result})


def main():
    if "--ignore-term" in FLAGS:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    write("server.pid", str(os.getpid()))
    for line in sys.stdin:
        if line.strip():
            answer(json.loads(line))
    while "--ignore-eof" in FLAGS:
        time.sleep(3600)


main()
