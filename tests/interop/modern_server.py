"""A small server of our own on the official Python SDK (`mcp` 2.x), which
speaks the 2026-07-28 protocol as well as the legacy handshake: the interop
tests' modern-era peer. Run as `python modern_server.py` (stdio)."""

from typing import Annotated

from pydantic import BaseModel

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resolve import Elicit, Resolve

server = MCPServer("mcpvisor-interop-modern")


@server.tool()
def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


@server.tool()
async def count(n: int, ctx: Context) -> str:
    """Counts to n, reporting progress and logging each step."""
    for i in range(1, n + 1):
        await ctx.report_progress(i, n, f"step {i}")
        await ctx.info(f"counted {i}")
    return f"counted to {n}"


class Name(BaseModel):
    name: str = "Ada"


def ask_for_name() -> Elicit[Name]:
    return Elicit("What is your name?", Name)


@server.tool()
async def ask_name(name: Annotated[Name, Resolve(ask_for_name)]) -> str:
    """Asks the user for a name: an input_required round (MRTR) in the
    modern era, an elicitation/create request in the legacy one."""
    return f"accept:{name.name}"


@server.resource("note://hello", mime_type="text/plain")
def hello() -> str:
    """A fixed note."""
    return "hello from python"


@server.prompt()
def review(code: str) -> str:
    """Asks for a code review."""
    return f"Please review this code:\n{code}"


if __name__ == "__main__":
    server.run("stdio")
