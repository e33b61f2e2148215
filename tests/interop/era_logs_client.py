"""Logs and progress across the protocol eras through `mcpvisor serve`,
seen by the official Python SDK as the gateway's client.

usage: python era_logs_client.py handshake|2026 MCPVISOR CONFIG

CONFIG serves two Python servers whose `count(n)` tool reports n progress
steps and logs `counted i` at `info` for each (tests/interop/shared.py):
`py1` on the SDK's 1.x line (handshake era) and `py2` on its 2.x line,
which the gateway reaches at 2026-07-28.

- `handshake` (either SDK line): an `initialize`-era `ClientSession` with
  a logging and a progress callback. It hears both servers' messages with
  no `logging/setLevel` (the default level), none below the level it sets,
  and both servers' progress.
- `2026` (the 2.x line): a `Client` pinned to 2026-07-28 with
  `log_level="info"`. It hears both servers' messages at its requests'
  level, none for a request that asks for `warning`, and their progress.

Every check raises on failure; the last line printed is `ok N checks`.
Run by tests/interop/gateway_stdio.rs.
"""

import json
import sys
import warnings

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from client_checks import check, held, text

# logging/setLevel is deprecated at 2026-07-28 (2.x warns): it is what is tested.
warnings.filterwarnings("ignore", message=".*deprecated as of 2026-07-28")

SERVERS = ("py1", "py2")


class Heard:
    """The log messages the logging callback received, as (logger, data)."""

    def __init__(self):
        self.logs = []

    async def log(self, params):
        self.logs.append((params.logger, params.data))

    def said(self, server, since=0):
        return [data for logger, data in self.logs[since:] if logger == server]

    async def until_said(self, server, data, since=0):
        with anyio.fail_after(30):
            while data not in self.said(server, since):
                await anyio.sleep(0.01)


def progress_into(steps):
    async def progress(value, total, message):
        steps.append(value)

    return progress


async def check_eras(read_resource):
    """Once both servers are connected: the era each speaks to the gateway."""
    with anyio.fail_after(30):
        while True:
            read = await read_resource("mcpvisor://status")
            statuses = {status["name"]: status for status in json.loads(read.contents[0].text)}
            if all(statuses[server]["state"] == "connected" for server in SERVERS):
                break
            await anyio.sleep(0.05)
    versions = {server: statuses[server]["protocol_version"] for server in SERVERS}
    check(versions["py2"] == "2026-07-28", f"py2 is reached at 2026-07-28 ({versions})")
    check(versions["py1"] < "2026", f"py1 is reached in the handshake era ({versions})")


async def counts(call, heard):
    """Each server's count(2): its progress and its two messages reach the client."""
    for server in SERVERS:
        steps = []
        result = await call(f"{server}__count", {"n": 2}, progress_callback=progress_into(steps))
        check(text(result) == "counted to 2", f"{server}__count answers")
        check(steps == [1, 2], f"{server}'s progress reaches the progress callback ({steps})")
        await heard.until_said(server, "counted 2")
        check(heard.said(server)[-2:] == ["counted 1", "counted 2"], f"{server}'s log messages reach the logging callback")


async def nothing_below(quiet_call, call, heard, what):
    """quiet_call's count(3) logs nothing that reaches the client; the
    next call's count(4) does (messages arrive in order, so none of the
    first call's can come after them)."""
    for server in SERVERS:
        since = len(heard.logs)
        await quiet_call(f"{server}__count", {"n": 3})
        await call(f"{server}__count", {"n": 4})
        await heard.until_said(server, "counted 4", since)
        said = heard.said(server, since)
        check(said == [f"counted {i}" for i in range(1, 5)], f"{server}: nothing below {what} ({said})")


def gateway(binary, config):
    # No audit log: the SDK starts the gateway without our XDG_STATE_HOME, and the log is not what is tested.
    return StdioServerParameters(command=binary, args=["--config", config, "serve", "--no-audit"])


async def handshake(binary, config):
    heard = Heard()
    async with stdio_client(gateway(binary, config)) as (read, write):
        async with ClientSession(read, write, logging_callback=heard.log) as session:
            await session.initialize()
            await check_eras(session.read_resource)
            await counts(session.call_tool, heard)

            async def after_info(name, arguments):
                await session.set_logging_level("info")
                return await session.call_tool(name, arguments)

            async def at_warning(name, arguments):
                await session.set_logging_level("warning")
                return await session.call_tool(name, arguments)

            await nothing_below(at_warning, after_info, heard, "the session's level (warning)")


async def modern(binary, config):
    from mcp.client.client import Client

    heard = Heard()
    async with Client(gateway(binary, config), mode="2026-07-28", log_level="info", logging_callback=heard.log) as client:
        await check_eras(client.read_resource)
        await counts(client.call_tool, heard)

        async def at_warning(name, arguments):
            return await client.call_tool(name, arguments, meta={"io.modelcontextprotocol/logLevel": "warning"})

        await nothing_below(at_warning, client.call_tool, heard, "the request's level (warning)")


if __name__ == "__main__":
    mode, binary, config = sys.argv[1:4]
    anyio.run(handshake if mode == "handshake" else modern, binary, config)
    print(f"ok {held()} checks", flush=True)
