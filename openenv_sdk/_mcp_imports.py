"""One lock around this process's imports of the `mcp` package.

A server imports the official MCP server in a background thread at start-up, and a client in
the same process (a notebook, a test, a trainer serving in-process) may import the MCP client
at that moment. `mcp`'s client and server modules import each other, and two threads importing
them at once can each get the other's module half initialised (`ImportError: cannot import name
'Server' from partially initialized module 'mcp.server'`). Every import of `mcp` in the SDK
goes through this lock; once the modules are loaded, taking it costs nothing that matters.
"""

from __future__ import annotations

import threading

__all__ = ["MCP_IMPORT_LOCK"]

MCP_IMPORT_LOCK = threading.RLock()
