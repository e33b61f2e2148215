"""A small server of our own on the official Python SDK's 1.x line
(`mcp` 1.x FastMCP, pinned by .ci/interop-setup in a venv of its own): the
interop tests' peer for the `initialize` era over HTTP and stdio.

usage: python fastmcp_server.py streamable-http|sse PORT
       python fastmcp_server.py stdio

Over HTTP it listens on 127.0.0.1:PORT, at `/mcp` (Streamable HTTP, with
sessions) or `/sse` (the legacy HTTP+SSE transport, messages POSTed to the
endpoint it announces). The SDK's server (uvicorn) says `Uvicorn running
on` on stderr once it accepts connections.

| tool | exercises |
| --- | --- |
| `add(a, b)` | a plain call; structured output (`{"result": a+b}`) |
| `count(n)` | n progress notifications and n `info` log messages |
| `ask_name()` | elicitation: an `elicitation/create` request, `accept:<name>` |
| `summarize(text)` | sampling: a `sampling/createMessage` request |
| `list_roots()` | roots: a `roots/list` request, one URI a line |
| `touch(uri)` | `notifications/resources/updated` when `uri` is subscribed |

Resources `note://hello` (fixed text) and the template `note://echo/{word}`;
the prompt `review(code)`; `resources/subscribe` and `unsubscribe`.
"""

import sys

from pydantic import AnyUrl, BaseModel

sys.dont_write_bytecode = True  # no __pycache__ beside the sources
import shared  # noqa: E402 (after the line above)
from mcp.server.fastmcp import Context, FastMCP
from mcp.types import SamplingMessage, TextContent

transport, port = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 0
server = FastMCP("mcpvisor-interop-fastmcp", host="127.0.0.1", port=port, log_level="INFO")
subscribed: set[str] = set()


shared.register(server, Context, "hello from fastmcp")


class Name(BaseModel):
    name: str = "Ada"


@server.tool()
async def ask_name(ctx: Context) -> str:
    """Asks the user for a name (elicitation/create)."""
    answer = await ctx.elicit("What is your name?", Name)
    return f"{answer.action}:{answer.data.name}" if answer.action == "accept" else answer.action


@server.tool()
async def summarize(text: str, ctx: Context) -> str:
    """Asks the client's model for a summary of `text` (sampling/createMessage)."""
    message = SamplingMessage(role="user", content=TextContent(type="text", text=f"Summarize: {text}"))
    result = await ctx.session.create_message([message], max_tokens=50, system_prompt="You summarize in one line.")
    said = result.content.text if isinstance(result.content, TextContent) else str(result.content)
    return f"summary by {result.model}: {said}"


@server.tool()
async def list_roots(ctx: Context) -> str:
    """Lists the client's roots (roots/list), one URI a line."""
    roots = await ctx.session.list_roots()
    return "\n".join(str(root.uri) for root in roots.roots) or "(no roots)"


@server.tool()
async def touch(uri: str, ctx: Context) -> str:
    """Announces that the resource `uri` changed, if the client subscribed to it."""
    if uri in subscribed:
        await ctx.session.send_resource_updated(AnyUrl(uri))
    return f"touched {uri}"




@server._mcp_server.subscribe_resource()
async def subscribe(uri: AnyUrl) -> None:
    subscribed.add(str(uri))


@server._mcp_server.unsubscribe_resource()
async def unsubscribe(uri: AnyUrl) -> None:
    subscribed.discard(str(uri))


def announce_subscriptions(get_capabilities):
    """FastMCP 1.x announces `resources.subscribe: false` even with the
    handlers above registered: say what the server does."""

    def announced(*args, **kwargs):
        capabilities = get_capabilities(*args, **kwargs)
        if capabilities.resources is not None:
            capabilities.resources.subscribe = True
        return capabilities

    return announced


server._mcp_server.get_capabilities = announce_subscriptions(server._mcp_server.get_capabilities)

if __name__ == "__main__":
    server.run(transport)
