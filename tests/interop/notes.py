"""What our two Python interop servers (modern_server.py on the SDK's 2.x
line, fastmcp_server.py on its 1.x line) offer alike: the resources
`note://hello` (saying `greeting`) and `note://echo/{word}`, and the prompt
`review(code)`. Both SDKs' servers take the same decorators."""


def register(server, greeting: str) -> None:
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
