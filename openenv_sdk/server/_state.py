"""`ServerState`: what every route handler reads. A leaf: it imports no route module."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..environment import Environment
from ..types import MetadataResponse, SchemaResponse
from ._config import ServerConfig
from ._manager import SessionManager

__all__ = ["ServerState"]


@dataclass
class ServerState:
    """What every route handler reads: the class, its schemas, the sessions."""

    env_cls: type[Environment[Any, Any, Any]]
    config: ServerConfig
    sessions: SessionManager
    metadata: MetadataResponse
    schema: SchemaResponse
    mcp_sessions: Callable[[], int] = lambda: 0
    """How many MCP (streamable HTTP) sessions are open at `/mcp`."""
    snapshots: Any = None
    """The checkpoint store (`_snapshots.SnapshotStore`), made on the first checkpoint or restore."""
