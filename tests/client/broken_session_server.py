"""A WebSocket server, run as its own process, that breaks the session handshake: the upgrade
succeeds, and the first message (the client's `session` request) gets a typed error, after which
the connection stays open until the client closes it. Prints its port, then serves until killed.

    python broken_session_server.py
"""

from __future__ import annotations

import json
import sys

from websockets.exceptions import ConnectionClosed
from websockets.sync.server import ServerConnection, serve


def handle(conn: ServerConnection) -> None:
    try:
        request = json.loads(conn.recv(timeout=30))
        error = {"code": "INTERNAL_ERROR", "message": "no sessions on this server"}
        conn.send(json.dumps({"type": "error", "id": request.get("id"), "data": error}))
        for _ in conn:  # hold the connection until the client closes it
            pass
    except (ConnectionClosed, TimeoutError):
        pass


def main() -> None:
    with serve(handle, "127.0.0.1", 0) as server:
        print(server.socket.getsockname()[1], flush=True)
        server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
