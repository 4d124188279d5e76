"""`ServerConfig`: how a server holds sessions, and what one request may hold."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from ._limits import DEFAULT_MAX_JSON_DEPTH

__all__ = ["ServerConfig"]

_MIB = 1024 * 1024


class ServerConfig(BaseModel):
    """How a server holds sessions, and what one request may hold. Every limit has a finite default.

    Sessions: `max_sessions`, `idle_timeout_s`, `unreset_grace_s`, `max_mcp_sessions`.
    Environment code: `tool_timeout_s`, `max_abandoned_threads`, `disconnect_grace_s`.
    Sizes and times on the wire: `max_message_bytes`, `header_timeout_s`, `max_json_depth`, `max_tool_result_bytes`, `max_transcript_bytes`.
    Access: `orchestrator_token`.
    Checkpoints: `checkpoint_dir`, `max_checkpoints`, `max_checkpoint_bytes`, `max_checkpoint_store_bytes`.
    Process: `gc_full_interval_s`.
    """

    model_config = ConfigDict(extra="forbid")

    max_sessions: int = Field(default=1024, ge=1, description="Sessions held at once; more get CAPACITY_REACHED.")
    idle_timeout_s: float | None = Field(
        default=600.0, gt=0, description="Close a session after this long without a message; None never does."
    )
    unreset_grace_s: float | None = Field(
        default=30.0,
        gt=0,
        description="Close a session not reset within this many seconds of its creation (`POST /sessions`, "
        "a WebSocket that only connects); None leaves it to `idle_timeout_s`.",
    )
    max_mcp_sessions: int = Field(
        default=1024, ge=1, description="MCP (streamable HTTP) sessions held at once at `/mcp`; more are refused."
    )
    tool_timeout_s: float = Field(default=60.0, gt=0, description="The most one tool call may take, in seconds.")
    max_abandoned_threads: int = Field(
        default=64,
        ge=1,
        description="Sync calls that timed out but still run on their session's thread; while this many run, "
        "new sessions get CAPACITY_REACHED. (A session whose call timed out is busy until the call ends.)",
    )
    disconnect_grace_s: float = Field(
        default=0.5,
        ge=0,
        description="When a WebSocket client goes away while its call runs, the call gets this long to end "
        "by itself; then it is cancelled (a coroutine) or its environment closed beside it (a call on a "
        "thread: `close()` kills its commands), and the session ends. A server that stops gives none.",
    )
    max_message_bytes: int = Field(
        default=8 * _MIB, ge=1024, description="Largest accepted request body or WebSocket message, in bytes."
    )
    max_json_depth: int = Field(
        default=DEFAULT_MAX_JSON_DEPTH, ge=2, le=900, description="Deepest nesting of arrays and objects accepted."
    )
    max_tool_result_bytes: int = Field(
        default=4 * _MIB,
        ge=1024,
        description="Largest tool result, in bytes of text; a larger one is cut, with a marker that says so.",
    )
    max_transcript_bytes: int = Field(
        default=4 * _MIB,
        ge=4096,
        description="Bytes of the agent's tool calls kept per session for `transcript`: big arguments and "
        "outputs are cut and the oldest calls dropped, and the transcript says so.",
    )
    header_timeout_s: float = Field(
        default=10.0,
        gt=0,
        description="Seconds a connection may take to send a whole HTTP request head (from its opening, "
        "or from its previous response); past that it is closed (no slow-loris connection is held).",
    )
    orchestrator_token: SecretStr | None = Field(
        default=None,
        description="When set, every route but /health, /metadata, /schema, /openapi.json and /mcp needs "
        "`Authorization: Bearer <token>`. Unset, `create_app` reads OPENENV_ORCHESTRATOR_TOKEN.",
    )
    checkpoint_dir: str | None = Field(
        default=None,
        description="Where checkpoints are kept (they outlive the server); None: $OPENENV_CHECKPOINT_DIR, "
        "else /var/tmp/openenv-checkpoints/<environment name>.",
    )
    max_checkpoints: int = Field(default=1000, ge=1, description="Checkpoints kept at once; more get CHECKPOINT_LIMIT.")
    max_checkpoint_bytes: int = Field(
        default=256 * _MIB, ge=1024, description="Largest checkpoint (the episode's files and data), in bytes."
    )
    max_checkpoint_store_bytes: int = Field(
        default=4096 * _MIB, ge=1024, description="Bytes all kept checkpoints may hold together."
    )
    web: bool = Field(default=False, description="Serve the browser playground at `/web`.")
    gc_full_interval_s: float | None = Field(
        default=60.0,
        gt=0,
        description="While the server runs, the garbage collector's full collections come at least this "
        "often from a timer and 100 times less often from allocation, and start-up objects are frozen "
        "(see `openenv_sdk.server._gc`); None leaves the collector as it is.",
    )
