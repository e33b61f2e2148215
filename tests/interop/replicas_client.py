#!/usr/bin/env python3
"""The reference Python SDK client (mcp 2.x) through nginx in front of
replicas of `mcpvisor serve --http` (tests/interop/gateway_replicas.rs):
SESSIONS `initialize`-era sessions and one 2026-07-28 client whose sampling
call parks on `input_required` and is retried by the SDK. Then it prints
{"phase": "ready"} and waits for a line on stdin, while the test kills a
replica; then every session is used again. A session whose replica died
answers 404 (from a live replica: nginx's backup servers), which this SDK
raises as an MCPError (the 404's JSON-RPC body, "Session not found", or
"Session terminated" when the body is not JSON-RPC) and does not act on: as the specification asks of a client, a new session
is initialized (nginx places it on a live replica). Prints one JSON line per
check, then {"reinitialized": N}; exits 1 at the first failure.

    replicas_client.py URL SESSIONS
"""

import asyncio
import json
import sys
from contextlib import AsyncExitStack

from gateway_client_parts import check, sampled
from mcp import Client
from mcp.shared.exceptions import MCPError


async def echo(client, text):
    answer = await client.call_tool("demo__echo", {"text": text})
    return answer.content[0].text


async def parked_call(client, label):
    # demo__sample asks for sampling: the call answers input_required with a
    # requestState, the SDK runs the callback and retries with it.
    answer = await client.call_tool("demo__sample", {"prompt": "hi"})
    check(f"2026-07-28: parked call retried {label}", "sampled by python" in answer.content[0].text, answer)


async def open_session(stack, url):
    return await stack.enter_async_context(Client(url, mode="legacy"))


async def main():
    url, count = sys.argv[1], int(sys.argv[2])
    async with AsyncExitStack() as stack:
        sessions = [await open_session(stack, url) for _ in range(count)]
        for index, session in enumerate(sessions):
            check(f"legacy {index}: echo", await echo(session, f"before {index}") == f"before {index}")
        stateless = await stack.enter_async_context(Client(url, mode="2026-07-28", sampling_callback=sampled))
        check("2026-07-28: echo", await echo(stateless, "before") == "before")
        await parked_call(stateless, "before the kill")

        print(json.dumps({"phase": "ready"}), flush=True)
        go = await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        check("the test said go", go.strip() == "go", go)

        reinitialized = 0
        for index, session in enumerate(sessions):
            text = f"after {index}"
            try:
                answer = await echo(session, text)
            except MCPError as error:
                unknown = "Session not found" in str(error) or "Session terminated" in str(error)
                check(f"legacy {index}: a dead replica's session is unknown", unknown, error)
                reinitialized += 1
                answer = await echo(await open_session(stack, url), text)
            check(f"legacy {index}: echo after the kill", answer == text, answer)
        check("2026-07-28: echo after the kill", await echo(stateless, "after") == "after")
        await parked_call(stateless, "after the kill")
        print(json.dumps({"reinitialized": reinitialized}), flush=True)


asyncio.run(main())
