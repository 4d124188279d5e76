"""Everything that crosses the wire, as pydantic models.

The shapes are OpenEnv's (so its clients and servers interoperate with ours); additions
are optional fields and new message types, never changes to existing ones.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "Action",
    "CallToolAction",
    "CallToolObservation",
    "ErrorCode",
    "HealthResponse",
    "ListToolsAction",
    "ListToolsObservation",
    "MetadataResponse",
    "Observation",
    "ResetRequest",
    "SchemaResponse",
    "SessionInfo",
    "State",
    "StepResult",
    "ToolCallAction",
    "ToolError",
    "ToolErrorType",
    "ToolSchema",
    "WSReply",
    "WSRequest",
]


ORCHESTRATOR_TOKEN_VAR = "OPENENV_ORCHESTRATOR_TOKEN"
"""The environment variable that gives a server its orchestrator token (it removes it at startup);
re-exported as `openenv_sdk.server.ORCHESTRATOR_TOKEN_VAR`."""

ORCHESTRATOR_TOKEN_FILE_VAR = "OPENENV_ORCHESTRATOR_TOKEN_FILE"
"""`openenv serve --orchestrator-token-file`, as a variable: for an image whose command is fixed,
the token in a file (a mounted Kubernetes Secret, as `openenv deploy` writes it) rather than in the
environment."""

NO_AUTH_VAR = "OPENENV_NO_AUTH"
"""`1`: `openenv serve` runs without an orchestrator token, as `--no-auth` does (for an image whose
command is fixed). Without it and without a token, the server makes one: open only on purpose."""


class Action(BaseModel):
    """Base of every action. Unknown fields are refused, so a typo is an error, not a no-op."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, arbitrary_types_allowed=True)

    metadata: dict[str, Any] = Field(default_factory=dict, description="Free-form data carried with the action.")


class Observation(BaseModel):
    """Base of every observation: what the orchestrator sees after `reset` or `step`."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, arbitrary_types_allowed=True)

    done: bool = Field(default=False, description="Whether the episode has ended.")
    reward: bool | int | float | None = Field(
        default=None, description="The environment's own per-step reward, passed through unchanged."
    )
    metadata: dict[str, Any] = Field(default_factory=dict, description="Free-form data about this observation.")


class State(BaseModel):
    """Base of an environment's state. Environments add their own fields (extra fields are allowed)."""

    model_config = ConfigDict(extra="allow", validate_assignment=True, arbitrary_types_allowed=True)

    episode_id: str | None = Field(default=None, description="Identifier of the current episode.")
    step_count: int = Field(default=0, ge=0, description="Steps taken in the current episode.")


# --- Tool calls as actions -------------------------------------------------------------


class ToolCallAction(Action):
    """Call one of the environment's tools from `step`: `{"tool": "echo", "arguments": {...}}`."""

    tool: str = Field(description="Name of the tool to call.")
    arguments: dict[str, Any] = Field(default_factory=dict, description="Arguments by parameter name.")


class CallToolAction(Action):
    """OpenEnv's spelling of a tool call: `{"type": "call_tool", "tool_name": ..., "arguments": {...}}`."""

    type: Literal["call_tool"] = "call_tool"
    tool_name: str = Field(description="Name of the tool to call.")
    arguments: dict[str, Any] = Field(default_factory=dict, description="Arguments by parameter name.")


class ListToolsAction(Action):
    """OpenEnv's action that lists the tools: `{"type": "list_tools"}`."""

    type: Literal["list_tools"] = "list_tools"


class ToolErrorType(str, Enum):
    """Why a tool call made from `step` failed (OpenEnv's values)."""

    EXECUTION_ERROR = "execution_error"
    INVALID_ARGS = "invalid_args"
    TRANSPORT_ERROR = "transport_error"
    TOOL_NOT_FOUND = "tool_not_found"
    TIMEOUT = "timeout"


class ToolError(BaseModel):
    """A tool call's failure, seen by whoever made the call; the session goes on.

    The wire model (OpenEnv's name and fields), not an exception: a tool fails by raising
    `openenv_sdk.ToolFailure`, which the server reports as this (docs/errors.md).
    """

    error_type: ToolErrorType
    message: str


class ToolSchema(BaseModel):
    """A tool as listed to agents: MCP's `Tool` shape."""

    name: str
    description: str = ""
    input_schema: dict[str, Any] = Field(description="JSON Schema of the arguments object.")


class CallToolObservation(Observation):
    """The result of a tool call made through `step`.

    `result` is MCP's `CallToolResult` as JSON (`content`, `structuredContent`, `isError`), plus
    `data`: the tool's return value itself when it is JSON-serialisable.
    """

    tool_name: str
    result: dict[str, Any] | None = None
    error: ToolError | None = None


class ListToolsObservation(Observation):
    """The answer to a `list_tools` action."""

    tools: list[ToolSchema]


# --- Wire envelopes ---------------------------------------------------------------------


class ErrorCode(str, Enum):
    """Typed error codes, on WebSocket error replies and HTTP error bodies.

    The first seven are OpenEnv's `WSErrorCode`; the rest are this SDK's additions.
    """

    INVALID_JSON = "INVALID_JSON"
    UNKNOWN_TYPE = "UNKNOWN_TYPE"
    VALIDATION_ERROR = "VALIDATION_ERROR"
    EXECUTION_ERROR = "EXECUTION_ERROR"
    CAPACITY_REACHED = "CAPACITY_REACHED"
    FACTORY_ERROR = "FACTORY_ERROR"
    SESSION_ERROR = "SESSION_ERROR"
    MESSAGE_TOO_LARGE = "MESSAGE_TOO_LARGE"
    SESSION_NOT_FOUND = "SESSION_NOT_FOUND"
    SESSION_REQUIRED = "SESSION_REQUIRED"
    NOT_RESET = "NOT_RESET"
    UNKNOWN_CALL = "UNKNOWN_CALL"
    TIMEOUT = "TIMEOUT"
    SESSION_BUSY = "SESSION_BUSY"
    UNAUTHORIZED = "UNAUTHORIZED"
    CHECKPOINT_NOT_FOUND = "CHECKPOINT_NOT_FOUND"
    CHECKPOINT_LIMIT = "CHECKPOINT_LIMIT"
    SNAPSHOT_UNSUPPORTED = "SNAPSHOT_UNSUPPORTED"


class WSRequest(BaseModel):
    """One message from client to server on `/ws`.

    `type` is one of `reset`, `step`, `state`, `close`, `mcp` (OpenEnv's), `session` and `call`
    (this SDK's). `id`, when given, is echoed on the reply, so replies can be matched to requests.
    """

    model_config = ConfigDict(extra="ignore")

    type: str
    data: dict[str, Any] | None = None
    id: str | int | None = None


WS_REPLY_TYPE: dict[str, str] = {
    "reset": "observation",
    "step": "observation",
    "state": "state",
    "session": "session",
    "call": "result",
    "mcp": "mcp",
    "checkpoint": "checkpoint",
    "restore": "restored",
    "drop_checkpoint": "dropped",
}
"""The `type` of the reply to each request `type` on `/ws`, read by the server and the client
alike (`close` gets no reply; any request may get an `error` instead)."""


class WSReply(BaseModel):
    """One message from server to client: `observation`, `state`, `mcp`, `session`, `result` or `error`."""

    type: str
    data: Any
    id: str | int | None = None


class ResetRequest(BaseModel):
    """Arguments of `reset`. Fields beyond `seed` and `episode_id` are task fields, passed to `reset(**task)`."""

    model_config = ConfigDict(extra="allow")

    seed: int | None = Field(default=None, description="Random seed for a reproducible episode.")
    episode_id: str | None = Field(default=None, max_length=255, description="Identifier to give the episode.")


class StepResult(BaseModel):
    """An observation as sent on the wire: OpenEnv's `{observation, reward, done, metadata}`."""

    observation: dict[str, Any]
    reward: bool | int | float | None = None
    done: bool = False
    metadata: dict[str, Any] | None = None


class HealthResponse(BaseModel):
    """`GET /health`."""

    status: Literal["healthy", "unhealthy", "degraded"] = "healthy"
    active_sessions: int = Field(ge=0)
    max_sessions: int = Field(ge=1)
    unreset_sessions: int | None = Field(
        default=None, ge=0, description="Sessions not reset yet (counted in `active_sessions`)."
    )
    mcp_sessions: int | None = Field(default=None, ge=0, description="Open MCP (streamable HTTP) sessions at `/mcp`.")
    max_mcp_sessions: int | None = Field(default=None, ge=1, description="Most MCP sessions held at once.")
    abandoned_threads: int | None = Field(
        default=None, ge=0, description="Sync calls that timed out and still run on their session's thread."
    )
    max_abandoned_threads: int | None = Field(
        default=None, ge=1, description="While this many run, new sessions are refused (`CAPACITY_REACHED`)."
    )
    isolation: dict[str, str | bool] | None = Field(
        default=None,
        description="Sandboxed environments only: whether agent commands are isolated per session "
        "(`isolated`), how (`mode`: `bubblewrap`, `none` when opted out) and `detail`.",
    )


class MetadataResponse(BaseModel):
    """`GET /metadata`: OpenEnv's `EnvironmentMetadata` fields."""

    name: str
    description: str
    readme_content: str | None = None
    version: str | None = None
    author: str | None = None
    documentation_url: str | None = None


class SchemaResponse(BaseModel):
    """`GET /schema`: JSON Schemas of the action, the observation and the environment's own state,
    and the tools the agent can call."""

    action: dict[str, Any]
    observation: dict[str, Any]
    state: dict[str, Any]
    tools: list[ToolSchema] = Field(default_factory=list)


class SessionInfo(BaseModel):
    """A session, as `POST /sessions` and the WebSocket `session` message describe it.

    `mcp_token` binds an agent's MCP connection to this session: give the agent the URL
    `{base_url}/mcp?session={mcp_token}` (or the header `Authorization: Bearer {mcp_token}`).
    """

    session_id: str
    mcp_token: str
    mcp_path: str = "/mcp"
