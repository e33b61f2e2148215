"""The reference Python SDK client (`mcp` 2.x) against `mcpvisor serve`.

Usage: python gateway_client.py MCPVISOR CONFIG

CONFIG serves two demo servers, `demo` and `other`. Every check raises on
failure; the last line printed is `ok N checks`. Run by tests/interop/gateway_stdio.rs.
"""

import json
import os
import signal
import sys

import anyio
import mcp_types as types
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from client_checks import check, held, text


class Heard:
    """Notifications heard, each method with an event to wait on."""

    def __init__(self):
        self.events = {}
        self.seen = []

    def event(self, method):
        return self.events.setdefault(method, anyio.Event())

    async def __call__(self, message):
        method = getattr(message, "method", None)
        if method is None:
            return
        self.seen.append(message)
        self.event(method).set()

    def reset(self, method):
        self.events[method] = anyio.Event()


async def sampling(context, params):
    asked = params.messages[0].content.text
    return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text=f"python model: {asked}"), model="py")


async def elicitation(context, params):
    return types.ElicitResult(action="accept", content={"name": "Grace"})


async def roots(context):
    return types.ListRootsResult(roots=[types.Root(uri="file:///python/root", name="root")])


async def statuses(session):
    read = await session.read_resource("mcpvisor://status")
    return {status["name"]: status for status in json.loads(read.contents[0].text)}


async def main(binary, config):
    heard = Heard()
    logs = []

    async def logging(params):
        logs.append(params)

    server = StdioServerParameters(command=binary, args=["--config", config, "serve"])
    async with stdio_client(server) as (read, write):
        async with ClientSession(
            read,
            write,
            sampling_callback=sampling,
            elicitation_callback=elicitation,
            list_roots_callback=roots,
            logging_callback=logging,
            message_handler=heard,
        ) as session:
            init = await session.initialize()
            check(init.server_info.name == "mcpvisor", "initialize names the gateway")

            names = [tool.name for tool in (await session.list_tools()).tools]
            check("demo__echo" in names and "other__echo" in names, "tools are served as {server}__{name}")
            check(text(await session.call_tool("other__echo", {"text": "hi"})) == "hi", "a tool call goes through")

            steps = []

            async def progress(value, total, message):
                steps.append(value)

            done = await session.call_tool("demo__progress", {"steps": 3, "ms": 1}, progress_callback=progress)
            check(text(done) == "done 3 steps" and len(steps) == 3, f"progress reaches the client's callback ({steps})")

            prompt = await session.get_prompt("demo__greet", {"name": "Ada"})
            check("Ada" in prompt.messages[0].content.text, "a prompt is filled in")
            completion = await session.complete(types.PromptReference(type="ref/prompt", name="demo__greet"), {"name": "style", "value": "pi"})
            check(completion.completion.values == ["pirate"], "completion is routed by the prompt")

            resources = [str(resource.uri) for resource in (await session.list_resources()).resources]
            check(resources[0] == "mcpvisor://status" and "demo://counter" in resources, "resources keep their URIs")
            await session.subscribe_resource("demo://counter")
            await session.call_tool("demo__touch", {})
            with anyio.fail_after(30):
                await heard.event("notifications/resources/updated").wait()
            updated = [n for n in heard.seen if n.method == "notifications/resources/updated"]
            check(str(updated[0].params.uri) == "demo://counter", "a subscribed resource's update is forwarded")

            await session.set_logging_level("debug")
            await session.call_tool("demo__log", {"level": "warning", "message": "careful"})
            with anyio.fail_after(30):
                while not any("careful" in json.dumps(log.data) for log in logs):
                    await anyio.sleep(0.01)
            forwarded = next(log for log in logs if "careful" in json.dumps(log.data))
            check(forwarded.logger == "demo", "log messages carry the server's name as logger")
            clash = [log for log in logs if log.logger == "mcpvisor" and "demo://counter" in str(log.data)]
            check(clash and clash[0].level == "warning", "a URI served by two servers is reported in a log message")

            check("python model: hello" in text(await session.call_tool("demo__sample", {"prompt": "hello"})), "sampling round trip")
            elicited = text(await session.call_tool("demo__elicit", {"message": "Your name?"}))
            check("accept" in elicited and "Grace" in elicited, "elicitation round trip")
            check("file:///python/root" in text(await session.call_tool("demo__roots", {})), "roots round trip")

            try:
                await session.call_tool("demo__nope", {})
                check(False, "an unknown tool fails")
            except Exception as error:  # the SDK raises MCPError for a JSON-RPC error
                check("demo__nope" in str(error), f"an unknown tool is a JSON-RPC error naming it ({error})")

            # Cancellation: cancel a call once it is in flight upstream.
            async with anyio.create_task_group() as group:
                async def slow():
                    await session.call_tool("demo__sleep", {"ms": 600000})

                group.start_soon(slow)
                with anyio.fail_after(30):
                    while (await statuses(session))["demo"]["in_flight"] < 1:
                        await anyio.sleep(0.01)
                group.cancel_scope.cancel()
            with anyio.fail_after(30):
                while True:
                    received = await session.call_tool("demo__cancellations", {})
                    cancelled = (received.structured_content or {}).get("cancellations", [])
                    if any(entry["tool"] == "sleep" for entry in cancelled):
                        break
                    await anyio.sleep(0.01)
            check(any(entry["arguments"] == {"ms": 600000} for entry in cancelled), "cancellation reaches the upstream call")

            # An upstream SIGKILLed: the list changes, and it serves again once restarted.
            heard.reset("notifications/tools/list_changed")
            os.kill((await statuses(session))["other"]["pid"], signal.SIGKILL)
            with anyio.fail_after(30):
                await heard.event("notifications/tools/list_changed").wait()
            check(text(await session.call_tool("other__echo", {"text": "back"})) == "back", "list_changed after a SIGKILL, then served again")
    print(f"ok {held()} checks", flush=True)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2])
