#!/usr/bin/env python3
"""The reference Python SDK client (mcp 2.x) against `mcpvisor serve --http`
in front of the demo server: tools, a call with progress, and sampling,
in the `initialize` era and the 2026-07-28 era. Prints one JSON line per
check and exits 1 at the first failure.

    gateway_http_client.py URL
"""

import asyncio
import sys

from gateway_client_parts import check, sampled
from mcp import Client


async def run(url, mode):
    progress = []

    async def on_progress(value, total, message):
        progress.append(value)

    async with Client(url, mode=mode, sampling_callback=sampled) as client:
        tools = await client.list_tools()
        names = [tool.name for tool in tools.tools]
        check(f"{mode}: tools listed", "demo__echo" in names, names[:5])
        echo = await client.call_tool("demo__echo", {"text": f"hello {mode}"})
        check(f"{mode}: echo", echo.content[0].text == f"hello {mode}", echo)
        done = await client.call_tool("demo__progress", {"steps": 3, "ms": 1}, progress_callback=on_progress)
        check(f"{mode}: progress", len(progress) == 3 and not done.is_error, progress)
        if mode == "legacy":
            sample = await client.call_tool("demo__sample", {"prompt": "hi"})
            check(f"{mode}: sampling round trip", "sampled by python" in sample.content[0].text, sample)


async def main():
    url = sys.argv[1]
    for mode in ("legacy", "2026-07-28"):
        await run(url, mode)


asyncio.run(main())
