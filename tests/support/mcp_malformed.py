"""An MCP server over stdio that answers ``tools/call`` with a result of the wrong shape.

It speaks just enough JSON-RPC for a client to connect with the 2025-11-25 handshake (it
refuses ``server/discover``, as a server of that era does) and list its one tool, ``garbled``,
whose every call returns ``content`` as a string instead of a list of blocks.
"""

from __future__ import annotations

import json
import sys
from typing import Any


def _answer(request: dict[str, Any]) -> dict[str, Any]:
    method = request.get("method")
    reply: dict[str, Any] = {"jsonrpc": "2.0", "id": request["id"]}
    if method == "initialize":
        reply["result"] = {
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "malformed", "version": "1"},
        }
    elif method == "tools/list":
        reply["result"] = {"tools": [{"name": "garbled", "inputSchema": {"type": "object"}}]}
    elif method == "tools/call":
        reply["result"] = {"content": "this should be a list of blocks", "isError": "perhaps"}
    else:
        reply["error"] = {"code": -32601, "message": f"method not found: {method}"}
    return reply


def main() -> None:
    """Answer requests from standard input until it ends."""
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        if "id" not in request or "method" not in request:
            continue  # notifications and responses need no answer
        sys.stdout.write(json.dumps(_answer(request)) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
