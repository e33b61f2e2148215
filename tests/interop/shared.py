"""What our two Python interop servers (modern_server.py on the SDK's 2.x
line, fastmcp_server.py on its 1.x line) offer alike, registered on either
SDK's server (their decorators take the same arguments):

- `add(a, b)`: a plain call with structured output (`{"result": a+b}`);
- `count(n)`: n progress notifications (`step i`) and n `info` logs (`counted i`);
- the resources `note://hello` (saying `greeting`) and `note://echo/{word}`;
- the prompt `review(code)`.

`context` is the SDK's `Context` class, by which it recognises the
parameter it fills in."""


def register(server, context, greeting: str) -> None:
    @server.tool()
    def add(a: int, b: int) -> int:
        """Adds two integers."""
        return a + b

    @server.tool()
    async def count(n: int, ctx: context) -> str:
        """Counts to n, reporting progress and logging each step."""
        for i in range(1, n + 1):
            await ctx.report_progress(i, n, f"step {i}")
            await ctx.info(f"counted {i}")
        return f"counted to {n}"

    @server.resource("note://hello", mime_type="text/plain")
    def hello() -> str:
        """A fixed note."""
        return greeting

    @server.resource("note://echo/{word}", mime_type="text/plain")
    def echo_note(word: str) -> str:
        """A note that repeats the word in its URI."""
        return f"echo: {word}"

    @server.prompt()
    def review(code: str) -> str:
        """Asks for a code review."""
        return f"Please review this code:\n{code}"
