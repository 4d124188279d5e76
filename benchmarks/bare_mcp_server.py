"""A bare official MCP server with one `echo` tool and no environment, for bench_echo.py.

It is what our `/mcp` is measured against: `MCPServer` from the `mcp` SDK, served by uvicorn
with the streamable-HTTP settings our server uses (JSON responses, not SSE; no Host check). The
difference between the two is what the environment server adds to an MCP `tools/call`.

Usage: python benchmarks/bare_mcp_server.py --port 8002 [--sse]
"""

from __future__ import annotations

import argparse

import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings


def build_app(*, json_response: bool) -> object:
    server = MCPServer("bare-echo", log_level="WARNING")

    @server.tool()
    def echo(message: str) -> str:
        """Return the message unchanged."""
        return message

    return server.streamable_http_app(
        streamable_http_path="/mcp",
        json_response=json_response,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8002)
    parser.add_argument("--sse", action="store_true", help="answer in SSE streams (the SDK's default), not JSON")
    parser.add_argument("--max-sessions", type=int, default=0, help="ignored (bench_echo passes it to every server)")
    args = parser.parse_args()
    uvicorn.run(build_app(json_response=not args.sse), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
