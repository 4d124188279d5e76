"""The SDK's errors, one tree.

    OpenEnvError
    ├── EnvironmentDefinitionError   a class that breaks the authoring contract (raised at class definition)
    │   └── EnvCheckError            `check_env` found rules the class breaks (carries the `report`)
    ├── ManifestError                openenv.yaml is missing, malformed or has wrong types
    ├── ServerError                  a server answered with a typed error (carries `code`)
    │   ├── RequestError             INVALID_JSON / UNKNOWN_TYPE / MESSAGE_TOO_LARGE: unreadable request
    │   ├── InvalidActionError       VALIDATION_ERROR / UNKNOWN_CALL: the action failed its schema
    │   ├── ExecutionError           EXECUTION_ERROR / FACTORY_ERROR: the environment raised
    │   ├── ServerTimeout            TIMEOUT: the environment took longer than the server allows
    │   ├── CapacityError            CAPACITY_REACHED: the server holds its maximum of sessions
    │   ├── SessionError             SESSION_NOT_FOUND / SESSION_REQUIRED / SESSION_ERROR / NOT_RESET / SESSION_BUSY
    │   ├── AuthenticationError      UNAUTHORIZED: a missing or wrong orchestrator token
    │   ├── CheckpointError          CHECKPOINT_NOT_FOUND / CHECKPOINT_LIMIT / SNAPSHOT_UNSUPPORTED (docs/fork.md)
    │   └── ToolCallError            an MCP tool call was refused (unknown tool: `error_type` tool_not_found)
    ├── ToolFailure                  an environment's tool reports a failure to the agent (an `isError` result)
    ├── TransportError               the connection failed or closed under a request
    │   └── RequestTimeout           no answer within the client's `timeout_s`
    ├── ClientStateError             a closed client (or grading session) was used, or one not started
    ├── ProviderError                a provider could not start or keep a server (`testing.serve_app` too)
    │   └── ContainerError           the container engine is unreachable or a build failed
    │       ├── EngineUnavailableError   containers: no engine answers, or the `docker` package is missing
    │       ├── BuildError               containers: an image build failed (carries the log's tail)
    │       └── ContainerRunError        containers: a container could not be started or kept serving
    │           ├── ContainerExitedError   it exited while it should serve (carries its last log lines)
    │           └── StartupTimeoutError    its server did not answer `GET /health` in time
    ├── SandboxError                 a sandbox could not be made or used (no uid left, closed, no proxy)
    │   ├── IsolationUnavailable     bubblewrap cannot run here and the operator did not opt out
    │   │   └── SeccompUnavailable   sandbox: the ptrace filter cannot be compiled (libseccomp missing)
    │   └── SandboxKilled            the host killed the sandbox (kill_all, close) while a command ran
    ├── EpisodeFailed                an episode's reward cannot be decided: never a reward (carries `failure`)
    ├── SampleError                  checks: a schema this sampler cannot satisfy (also a ValueError)
    ├── ScaffoldError                cli init: an unusable name or a non-empty folder (also a ValueError)
    ├── PushError                    cli push: the folder cannot be published as it is
    ├── RecordRejected               evaluation: a line of episodes.jsonl no run wrote (also a ValueError)
    ├── OutputMismatch               evaluation: the output folder holds another run's episodes (a ValueError)
    ├── ProfileError                 evaluation: a pass-rate profile that cannot be read (also a ValueError)
    ├── ArchiveRejected              a workspace archive (checkpoint or kept run) breaks a rule; nothing of it written (a ValueError)
    ├── WorkspaceTooLarge            a workspace over the archive's limits is not packed (a ValueError)
    ├── NotKept                      regrade: the run folder holds no kept state, or it is damaged (a ValueError)
    ├── SnapshotUnsupported          checkpoint: an environment's state cannot be snapshotted (names what)
    ├── SnapshotTooLarge             checkpoint: a snapshot over the store's size limits
    └── HarborImportError            harbor: a task that cannot be imported; every reason (a ValueError)
        ├── HarborNameError          the task's name is not a Harbor identifier
        ├── HarborSizeError          part of the task is over a limit
        └── HarborComposeError       its compose file is outside the supported subset

A class whose description starts with a module's name (`containers:`) is defined and exported there
(its children too), beside the code that raises it. Beside this tree, by design, the two of remote grading
(`openenv_sdk.grading._errors`): what the solution did, never the SDK failing. `ChannelError` is a
`BaseException` so that a test's `except Exception` cannot take a hang for the error it expects.

    RemoteError                      the solution raised an exception with no builtin equivalent here
    ChannelError                     the call got no answer from the solution (a BaseException)
    ├── RemoteTimeout                no answer within the per-call timeout
    ├── WorkerDied                   the worker exited (os._exit, a crash, a limit)
    ├── ProtocolError                the answer broke the wire format or its bounds (the only ProtocolError)
    ├── NotSendable                  a value cannot cross the boundary
    ├── StaleHandle                  a remote object of a worker that is gone
    └── SolutionImportError          the solution's module failed to import in the worker

A bad action or a failing tool is data for the caller, not a crash of the server: servers
send these as typed errors and keep the session; clients raise them with the server's code.
`error_class(code)` is the one table from wire code to class; every `ErrorCode` has its entry.
docs/errors.md is generated from this docstring and that table (scripts/gen_errors_doc.py).
"""

from __future__ import annotations

from typing import Any

from .types import ErrorCode, ToolErrorType

__all__ = [
    "AuthenticationError",
    "CapacityError",
    "ClientStateError",
    "ContainerError",
    "EnvCheckError",
    "EnvironmentDefinitionError",
    "EpisodeFailed",
    "ExecutionError",
    "InvalidActionError",
    "IsolationUnavailable",
    "ManifestError",
    "OpenEnvError",
    "ProviderError",
    "RequestError",
    "RequestTimeout",
    "SandboxError",
    "SandboxKilled",
    "ServerError",
    "ServerTimeout",
    "SessionError",
    "ToolCallError",
    "ToolFailure",
    "TransportError",
    "error_class",
]


class OpenEnvError(Exception):
    """Base of every error the SDK raises on purpose."""


class EnvironmentDefinitionError(OpenEnvError, TypeError):
    """An environment class breaks the authoring contract (e.g. a tool named `reset`)."""


class EnvCheckError(EnvironmentDefinitionError):
    """`check_env` found rules that an environment class breaks; the message names each one.

    Attributes:
        report: the `openenv_sdk.checks.ValidationReport` of every rule that ran.
    """

    def __init__(self, message: str, *, report: Any) -> None:
        super().__init__(message)
        self.report = report


class ManifestError(OpenEnvError, ValueError):
    """An `openenv.yaml` manifest is missing, malformed or has a field of the wrong type."""


class ServerError(OpenEnvError):
    """A server answered a request with a typed error.

    Attributes:
        code: the wire error code (`openenv_sdk.types.ErrorCode`), e.g. `"VALIDATION_ERROR"`.
        details: the rest of the error payload (e.g. pydantic's field `errors`).
    """

    def __init__(self, message: str, *, code: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.details = details or {}

    def __str__(self) -> str:
        return f"[{self.code}] {self.args[0]}"


class RequestError(ServerError):
    """The server could not read the request: not JSON, an unknown message type, or too large."""


class InvalidActionError(ServerError):
    """The action (or an orchestrator call's name or arguments) did not validate."""


class ExecutionError(ServerError):
    """The environment raised while handling the request (or could not be created); the session goes on."""


class ServerTimeout(ServerError):
    """The environment took longer than the server allows for the request."""


class AuthenticationError(ServerError):
    """The request lacked the orchestrator token, or carried a wrong one."""


class CapacityError(ServerError):
    """The server already holds its maximum number of sessions."""


class SessionError(ServerError):
    """The session is missing, unknown, expired, not reset yet, busy with another call, or failed."""


class CheckpointError(ServerError):
    """A checkpoint verb was refused: an unknown handle (`CHECKPOINT_NOT_FOUND`), the store's bound
    reached (`CHECKPOINT_LIMIT`), or an episode the environment cannot keep (`SNAPSHOT_UNSUPPORTED`)."""


class ToolCallError(ServerError):
    """A tool call could not be made (unknown tool, unbound session).

    Attributes:
        error_type: the `ToolErrorType` that `step` reports for the same mistake
            (`tool_not_found` for an unknown tool); None for a refusal `step` has no type for.
    """

    def __init__(
        self,
        message: str,
        *,
        code: str,
        details: dict[str, Any] | None = None,
        error_type: ToolErrorType | None = None,
    ) -> None:
        super().__init__(message, code=code, details=details)
        self.error_type = error_type


class ToolFailure(OpenEnvError):
    """Raised by an environment's tool to tell the agent that the call failed, and why.

    The server turns it into the call's failure, as it does any exception a tool raises: an
    `isError: true` result over MCP and `CallToolObservation.error` through `step`, and the
    session goes on. The text is `Tool '<name>' failed: <message>` (no class name: the message
    is written for the agent), and `step` reports `error_type`.

        @tool
        def read_file(self, path: str) -> str:
            if not self._exists(path):
                raise ToolFailure(f"{path} does not exist; list_files shows what does")

    Args:
        message: what the agent reads.
        error_type: what `step` reports: `execution_error` (the default), or `invalid_args`
            for an argument that passed the schema but that the tool refuses.
    """

    def __init__(self, message: str, *, error_type: ToolErrorType = ToolErrorType.EXECUTION_ERROR) -> None:
        super().__init__(message)
        self.error_type = ToolErrorType(error_type)


class TransportError(OpenEnvError):
    """The connection to the server failed or closed while a request was in flight."""


class RequestTimeout(TransportError):
    """The server gave no answer within the client's timeout."""


class ClientStateError(OpenEnvError, RuntimeError):
    """The client was used in a state that does not allow it (closed, or never opened)."""


class ProviderError(OpenEnvError):
    """A provider could not start a server, or the server it started died."""


class ContainerError(ProviderError):
    """The container engine is unreachable, or building or running an image failed."""


class SandboxError(OpenEnvError, RuntimeError):
    """A sandbox could not be made or used: no session uid left, the opt-out's user missing or
    root, a closed sandbox used, the egress proxy not started. Never raised for what a command
    does (that is its `CommandResult`)."""


class IsolationUnavailable(SandboxError):
    """Sessions cannot be isolated here; the message says what is missing and how to fix it."""


class SandboxKilled(SandboxError):
    """The host killed the sandbox (`kill_all`, `close`) while a command ran in it: the command's
    end says nothing of what the agent did, so it is no result (raised by `Sandbox.run`)."""


class EpisodeFailed(OpenEnvError):
    """An episode's reward could not be decided, not by the policy's doing: the reset failed, the
    sandbox was killed, the judge answered HTTP 500, the grader crashed. Never a reward: consumers
    leave the episode out of training and count it by `failure.cause` (docs/failures.md).

    Attributes:
        failure: the `openenv_sdk.failures.Failure` (cause, stage, message), a pydantic model.
    """

    def __init__(self, failure: Any) -> None:
        super().__init__(f"{failure.cause.value} failure at {failure.stage}: {failure.message}")
        self.failure = failure


_CLASS_BY_CODE: dict[ErrorCode, type[ServerError]] = {
    ErrorCode.INVALID_JSON: RequestError,
    ErrorCode.UNKNOWN_TYPE: RequestError,
    ErrorCode.MESSAGE_TOO_LARGE: RequestError,
    ErrorCode.VALIDATION_ERROR: InvalidActionError,
    ErrorCode.UNKNOWN_CALL: InvalidActionError,
    ErrorCode.EXECUTION_ERROR: ExecutionError,
    ErrorCode.FACTORY_ERROR: ExecutionError,
    ErrorCode.TIMEOUT: ServerTimeout,
    ErrorCode.CAPACITY_REACHED: CapacityError,
    ErrorCode.SESSION_ERROR: SessionError,
    ErrorCode.SESSION_NOT_FOUND: SessionError,
    ErrorCode.SESSION_REQUIRED: SessionError,
    ErrorCode.NOT_RESET: SessionError,
    ErrorCode.CHECKPOINT_NOT_FOUND: CheckpointError,
    ErrorCode.CHECKPOINT_LIMIT: CheckpointError,
    ErrorCode.SNAPSHOT_UNSUPPORTED: CheckpointError,
    ErrorCode.SESSION_BUSY: SessionError,
    ErrorCode.UNAUTHORIZED: AuthenticationError,
}


def error_class(code: str) -> type[ServerError]:
    """The `ServerError` subclass for a wire error code; `ServerError` itself for a code this SDK
    does not know (a newer or foreign server)."""
    try:
        return _CLASS_BY_CODE[ErrorCode(code)]
    except ValueError:
        return ServerError
