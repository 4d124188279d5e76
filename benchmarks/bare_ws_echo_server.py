"""A bare `websockets` echo server: no framework, no environment class, the same JSON shapes as
ours and OpenEnv's echo servers (`{"type": "observation", "data": {"observation": {...},
"reward": ..., "done": ...}}`, the request's `id` echoed). For bench_echo.py: the floor of a
WebSocket step with a given client (what the `websockets` library and JSON cost, and nothing
else).

Usage:
    .venv/bin/python benchmarks/bare_ws_echo_server.py --port 8002
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
from typing import Any

from websockets.asyncio.server import ServerConnection, serve


def reply_to(request: dict[str, Any]) -> dict[str, Any]:
    kind, data = request.get("type"), request.get("data") or {}
    if kind == "reset":
        observation = {"metadata": {}, "echoed_message": "Echo environment ready!", "message_length": 0}
        reply: dict[str, Any] = {"type": "observation", "data": {"observation": observation, "reward": None, "done": False}}
    elif kind == "step":
        message = str(data.get("message", ""))
        observation = {"metadata": {}, "echoed_message": message, "message_length": len(message)}
        reply = {
            "type": "observation",
            "data": {"observation": observation, "reward": len(message) * 0.1, "done": False},
        }
    elif kind == "state":
        reply = {"type": "state", "data": {"episode_id": None, "step_count": 0}}
    else:
        reply = {"type": "error", "data": {"code": "UNKNOWN_TYPE", "message": f"unknown type {kind!r}"}}
    if "id" in request:
        reply["id"] = request["id"]
    return reply


async def handle(ws: ServerConnection) -> None:
    async for message in ws:
        request = json.loads(message)
        if request.get("type") == "close":
            return
        await ws.send(json.dumps(reply_to(request)))


async def main(port: int) -> None:
    loop = asyncio.get_running_loop()
    stop = loop.create_future()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set_result, None)
    # as uvicorn serves ours: no compression, no keepalive pings, frames up to 8 MiB
    async with serve(handle, "127.0.0.1", port, compression=None, ping_interval=None, max_size=8 * 2**20):
        await stop


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--max-sessions", type=int, help="accepted, unused (the bench passes it to every server)")
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(main(parser.parse_args().port))
