"""Write the machine-readable protocol description to docs/protocol/.

    python scripts/gen_protocol_schema.py          # rewrite docs/protocol/*.json
    python scripts/gen_protocol_schema.py --check  # exit 1 if any is stale

- `openapi.json`: the OpenAPI document of the HTTP routes, as a server of the echo
  environment serves it at `/openapi.json` (an environment changes only its title and
  description; the shapes of `/schema`'s models are in `/schema`, per environment).
- `ws-messages.json`: a JSON Schema of every WebSocket `/ws` message, each request type and
  each reply type, built from the wire models of `openenv_sdk/types.py`.

`tests/docs/test_generated_docs.py` runs the check, and validates real `/ws` traffic against
`ws-messages.json`, so the description can drift neither from the code nor from the server.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT / "scripts") not in sys.path:  # for _gendoc, also when loaded by file path (as the tests do)
    sys.path.append(str(ROOT / "scripts"))
from _gendoc import write_or_check  # noqa: E402

sys.path.insert(0, str(ROOT))

from openenv_sdk.snapshots import (  # noqa: E402
    CheckpointInfo,
    CheckpointRequest,
    DropRequest,
    RestoredInfo,
    RestoreRequest,
)
from openenv_sdk.types import (  # noqa: E402
    CallToolAction,
    ErrorCode,
    ListToolsAction,
    ResetRequest,
    SessionInfo,
    StepResult,
    ToolCallAction,
)

DOCS_DIR = ROOT / "docs" / "protocol"

RequestId = Annotated[
    str | int | None,
    Field(default=None, description="Optional; when given, the reply carries the same `id` (request correlation)."),
]
ReplyId = Annotated[
    str | int | None,
    Field(default=None, description="The request's `id`, present when the request had one."),
]


class _Message(BaseModel):
    model_config = ConfigDict(extra="forbid")


# --- client -> server -------------------------------------------------------------------------


class _ClientMessage(_Message):
    traceparent: str | None = Field(
        default=None,
        description="Optional W3C trace context of the client's span (sent when tracing is on, see "
        "openenv_sdk.tracing): the server's span for this request is its child.",
    )
    tracestate: str | None = Field(default=None, description="Optional W3C `tracestate`, with `traceparent`.")


class ResetMessage(_ClientMessage):
    """Start an episode. Reply: `observation`."""

    type: Literal["reset"]
    data: ResetRequest | None = None
    id: RequestId


class StepMessage(_ClientMessage):
    """Apply one action. Reply: `observation` (or `error`, e.g. `VALIDATION_ERROR`, `NOT_RESET`)."""

    type: Literal["step"]
    data: ToolCallAction | CallToolAction | ListToolsAction | dict[str, Any] = Field(
        description="The action: an object of the environment's action model (`GET /schema`'s `action`), "
        "or a tool call in one of the three spellings."
    )
    id: RequestId


class StateMessage(_ClientMessage):
    """Read the environment's state. Reply: `state`."""

    type: Literal["state"]
    data: None = None
    id: RequestId


class CloseMessage(_ClientMessage):
    """End the session: the server closes the socket with code 1000 and sends no reply."""

    type: Literal["close"]
    data: None = None
    id: RequestId


class JsonRpcRequest(BaseModel):
    """A JSON-RPC 2.0 request: `initialize`, `ping`, `tools/list` or `tools/call`."""

    model_config = ConfigDict(extra="allow")

    jsonrpc: Literal["2.0"]
    method: str = Field(examples=["tools/list", "tools/call"])
    params: dict[str, Any] | None = None
    id: str | int | None = None


class McpMessage(_ClientMessage):
    """A JSON-RPC request to the environment's tools, in this session's episode. Reply: `mcp`."""

    type: Literal["mcp"]
    data: JsonRpcRequest
    id: RequestId


class SessionMessage(_ClientMessage):
    """Ask for this connection's session and the MCP token that binds an agent to it. Reply: `session`."""

    type: Literal["session"]
    data: None = None
    id: RequestId


class CallData(BaseModel):
    """An orchestrator-only call: `transcript`, or an `@orchestrator` method of the environment."""

    name: str
    arguments: dict[str, Any] | None = None


class CallMessage(_ClientMessage):
    """An orchestrator-only call (graders use them). Reply: `result`."""

    type: Literal["call"]
    data: CallData
    id: RequestId


class CheckpointMessage(_ClientMessage):
    """Keep this session's episode under a new opaque handle (orchestrator-only). Reply: `checkpoint`."""

    type: Literal["checkpoint"]
    data: CheckpointRequest | None = None
    id: RequestId


class RestoreMessage(_ClientMessage):
    """Continue a checkpoint's episode in this session (its own is replaced). Reply: `restored`."""

    type: Literal["restore"]
    data: RestoreRequest
    id: RequestId


class DropCheckpointMessage(_ClientMessage):
    """Forget a checkpoint and remove its files. Reply: `dropped`."""

    type: Literal["drop_checkpoint"]
    data: DropRequest
    id: RequestId


ClientMessage = Annotated[
    ResetMessage
    | StepMessage
    | StateMessage
    | CloseMessage
    | McpMessage
    | SessionMessage
    | CallMessage
    | CheckpointMessage
    | RestoreMessage
    | DropCheckpointMessage,
    Field(discriminator="type"),
]

# --- server -> client -------------------------------------------------------------------------


class ObservationReply(_Message):
    """The observation after `reset` or `step` (OpenEnv's `{observation, reward, done, metadata}`)."""

    type: Literal["observation"]
    data: StepResult
    id: ReplyId


class StateReply(_Message):
    """The environment's state: its own state model (`GET /schema`'s `state`)."""

    type: Literal["state"]
    data: dict[str, Any]
    id: ReplyId


class JsonRpcResponse(BaseModel):
    """A JSON-RPC 2.0 response: `result` (for `tools/call`, MCP's `CallToolResult`) or `error`."""

    model_config = ConfigDict(extra="forbid")

    jsonrpc: Literal["2.0"]
    id: str | int | None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = Field(default=None, description="`{code, message}`; e.g. -32602 for an unknown tool.")


class McpReply(_Message):
    """The JSON-RPC response to an `mcp` message."""

    type: Literal["mcp"]
    data: JsonRpcResponse
    id: ReplyId


class SessionReply(_Message):
    """This connection's session: its id and the MCP token for `/mcp?session=<mcp_token>`."""

    type: Literal["session"]
    data: SessionInfo
    id: ReplyId


class CallResult(BaseModel):
    name: str
    result: Any = None


class ResultReply(_Message):
    """The return value of an orchestrator-only call."""

    type: Literal["result"]
    data: CallResult
    id: ReplyId


class CheckpointReply(_Message):
    """The checkpoint's handle (opaque, never a path), its environment and size."""

    type: Literal["checkpoint"]
    data: CheckpointInfo
    id: ReplyId


class RestoredReply(_Message):
    """The session now holds the checkpointed episode: its state."""

    type: Literal["restored"]
    data: RestoredInfo
    id: ReplyId


class DroppedData(BaseModel):
    handle: str
    dropped: bool


class DroppedReply(_Message):
    """The checkpoint is forgotten."""

    type: Literal["dropped"]
    data: DroppedData
    id: ReplyId


class ErrorData(BaseModel):
    """A refused request; the session goes on (unless the code says the socket closes)."""

    model_config = ConfigDict(extra="allow")

    code: ErrorCode
    message: str
    errors: list[dict[str, Any]] | None = Field(
        default=None, description="With `VALIDATION_ERROR`: pydantic's field errors (`loc`, `msg`, `type`)."
    )


class ErrorReply(_Message):
    """A typed error. `CAPACITY_REACHED` and `SESSION_ERROR` are followed by the socket closing."""

    type: Literal["error"]
    data: ErrorData
    id: ReplyId


ServerMessage = Annotated[
    ObservationReply
    | StateReply
    | McpReply
    | SessionReply
    | ResultReply
    | CheckpointReply
    | RestoredReply
    | DroppedReply
    | ErrorReply,
    Field(discriminator="type"),
]


def ws_messages_schema() -> dict[str, Any]:
    """One JSON Schema document: `$defs/ClientMessage`, `$defs/ServerMessage` and every message."""
    client = TypeAdapter(ClientMessage).json_schema(ref_template="#/$defs/{model}")
    server = TypeAdapter(ServerMessage).json_schema(ref_template="#/$defs/{model}")
    defs = {**client.pop("$defs", {}), **server.pop("$defs", {})}
    defs["ClientMessage"] = {"description": "A message from client to server.", **client}
    defs["ServerMessage"] = {"description": "A message from server to client.", **server}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "openenv-sdk WebSocket /ws messages",
        "description": (
            "Every message on /ws is an envelope {type, data, id?}. A client sends a ClientMessage; "
            "the server answers each with one ServerMessage (close has no reply). Generated by "
            "scripts/gen_protocol_schema.py from openenv_sdk/types.py."
        ),
        "anyOf": [{"$ref": "#/$defs/ClientMessage"}, {"$ref": "#/$defs/ServerMessage"}],
        "$defs": dict(sorted(defs.items())),
    }


def openapi_document() -> dict[str, Any]:
    """The HTTP routes' OpenAPI document, from a server of the echo environment."""
    from openenv_sdk import create_app
    from openenv_sdk.loader import load_environment

    env_cls = load_environment(ROOT / "environments" / "echo").env_cls
    if env_cls is None:
        raise SystemExit("environments/echo/openenv.yaml names no environment class")
    return create_app(env_cls).openapi()


def render() -> dict[str, str]:
    """File name -> text of every file this script writes."""
    documents = {"openapi.json": openapi_document(), "ws-messages.json": ws_messages_schema()}
    return {name: json.dumps(doc, indent=2, ensure_ascii=False) + "\n" for name, doc in documents.items()}


def main() -> int:
    return write_or_check({DOCS_DIR / name: text for name, text in render().items()}, script=Path(__file__).name)


if __name__ == "__main__":
    sys.exit(main())
