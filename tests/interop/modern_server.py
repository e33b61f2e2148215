"""A small server of our own on the official Python SDK (`mcp` 2.x, pinned by
.ci/interop-setup), which speaks the 2026-07-28 protocol as well as the
legacy handshake: the interop tests' modern-era peer. The SDK's dual-era
loop lets the client's first request decide the era. Run as
`python modern_server.py` (stdio) or `python modern_server.py http PORT`
(stateless Streamable HTTP at `http://127.0.0.1:PORT/mcp`; it says
`Uvicorn running on` on stderr once it accepts connections).

What it offers (see docs/interop.md for the wire details):

| tool | exercises |
| --- | --- |
| `add(a, b)` | a plain call; structured output (`{"result": a+b}`) |
| `count(n)` | n progress notifications and n `info` log messages |
| `ask_name()` | elicitation: `input_required` (modern) or `elicitation/create` (legacy) |
| `summarize(text)` | sampling: `input_required` (modern) or `sampling/createMessage` (legacy) |
| `list_roots()` | roots: `input_required` (modern) or `roots/list` (legacy) |
| `touch(uri)` | a resource update: on the `subscriptions/listen` stream (modern) |

Resources `note://hello` (fixed text) and the template `note://echo/{word}`;
the prompt `review(code)`; completion of `review`'s `code` argument.
"""

import sys
import warnings
from typing import Annotated

from pydantic import BaseModel

sys.dont_write_bytecode = True  # no __pycache__ beside the sources
import shared  # noqa: E402 (after the line above)
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resolve import Elicit, ListRoots, Resolve, Sample
from mcp import MCPDeprecationWarning
from mcp.types import Completion, CreateMessageResult, ListRootsResult, PromptReference, SamplingMessage, TextContent

# ctx.info() is the logging capability, deprecated at 2026-07-28 yet still
# delivered to a request that opts in: keep stderr free of the warning.
warnings.filterwarnings("ignore", category=MCPDeprecationWarning)

server = MCPServer("mcpvisor-interop-modern", version="1.0.0")


shared.register(server, Context, "hello from python")


class Name(BaseModel):
    name: str = "Ada"


def ask_for_name() -> Elicit[Name]:
    return Elicit("What is your name?", Name)


@server.tool()
async def ask_name(name: Annotated[Name, Resolve(ask_for_name)]) -> str:
    """Asks the user for a name: an input_required round (MRTR) in the
    modern era, an elicitation/create request in the legacy one."""
    return f"accept:{name.name}"


def sample_summary(text: str) -> Sample:
    return Sample(
        [SamplingMessage(role="user", content=TextContent(type="text", text=f"Summarize: {text}"))],
        max_tokens=50,
        system_prompt="You summarize in one line.",
    )


@server.tool()
async def summarize(text: str, summary: Annotated[CreateMessageResult, Resolve(sample_summary)]) -> str:
    """Asks the client's model for a summary of `text`: an input_required
    round in the modern era, a sampling/createMessage request in the legacy one."""
    content = summary.content
    said = content.text if isinstance(content, TextContent) else str(content)
    return f"summary by {summary.model}: {said}"


def fetch_roots() -> ListRoots:
    return ListRoots()


@server.tool()
async def list_roots(roots: Annotated[ListRootsResult, Resolve(fetch_roots)]) -> str:
    """Lists the client's roots, one URI a line: an input_required round in
    the modern era, a roots/list request in the legacy one."""
    return "\n".join(str(root.uri) for root in roots.roots) or "(no roots)"


@server.tool()
async def touch(uri: str, ctx: Context) -> str:
    """Announces that the resource `uri` changed (to `subscriptions/listen` streams)."""
    await ctx.notify_resource_updated(uri)
    return f"touched {uri}"




LANGUAGES = ["python", "rust", "ruby"]


@server.completion()
async def complete(ref, argument, context):
    """Completes `review`'s `code` argument with a few language names."""
    if isinstance(ref, PromptReference) and ref.name == "review" and argument.name == "code":
        values = [language for language in LANGUAGES if language.startswith(argument.value)]
        return Completion(values=values, total=len(values), has_more=False)
    return None


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]), stateless_http=True)
    else:
        server.run("stdio")
