"""What the Python interop clients share: a check that counts what held,
and the text of a tool result."""

_held = 0


def check(condition, what):
    """Raises unless `condition`; prints and counts `what` when it holds."""
    global _held
    if not condition:
        raise AssertionError(what)
    _held += 1
    print(f"ok: {what}", flush=True)


def held():
    """How many checks held so far."""
    return _held


def text(result):
    return "".join(block.text for block in result.content if getattr(block, "type", "") == "text")
