"""What the Python SDK clients of the gateway's HTTP tests share: a check
printed as one JSON line (the Rust test reads them), ending the run when
it fails, and the sampling handler that answers the demo server."""

import json
import sys

import mcp_types as types


def check(name, ok, detail=""):
    print(json.dumps({"check": name, "ok": bool(ok), "detail": str(detail)[:300]}), flush=True)
    if not ok:
        sys.exit(1)


async def sampled(context, params):
    return types.CreateMessageResult(
        role="assistant", content=types.TextContent(type="text", text="sampled by python"), model="python-test"
    )
