"""Protocol checks against a running server: one `check_*` function per rule.

They speak the wire protocol directly (`httpx` and `websockets`, and the official `mcp`
client for the MCP check), so they work against any server that claims OpenEnv's protocol:
this SDK's, or OpenEnv's own. What only this SDK offers (the request `id` echo, standard MCP
sessions at `/mcp`) is checked as an *extension*: a server without it is reported, not failed,
unless `strict_extensions` is set (the server is known to be ours).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx

from .._mcp_imports import MCP_IMPORT_LOCK
from ..tools import RESERVED_NAMES
from ._result import CheckResult, Severity
from ._sample import SampleError, sample_from_schema

__all__ = [
    "DEFAULT_REQUEST_TIMEOUT_S",
    "RUNTIME_CHECKS",
    "RuntimeProbe",
    "check_health",
    "check_isolation",
    "check_mcp_jsonrpc",
    "check_mcp_official",
    "check_metadata",
    "check_openapi",
    "check_schema",
    "check_session_bounds",
    "check_ws_close",
    "check_ws_invalid_action",
    "check_ws_request_id",
    "check_ws_reset",
    "check_ws_state",
    "check_ws_step",
    "run_runtime_checks",
]

DEFAULT_REQUEST_TIMEOUT_S = 10.0
INVALID_FIELD = "__openenv_validate_not_a_field__"


class RuntimeProbe:
    """A connection to one server under validation, shared by the runtime checks.

    Args:
        base_url: `http://host:port` of the server.
        timeout_s: the longest any one request or reply may take, in seconds.
        strict_extensions: treat this SDK's extensions as required (the server is known to be ours).
    """

    def __init__(self, base_url: str, *, timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
                 strict_extensions: bool = False) -> None:
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s}")
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self.strict_extensions = strict_extensions
        self.http = httpx.Client(base_url=self.base_url, timeout=timeout_s)
        self.schema: dict[str, Any] | None = None
        self.ws: Any = None
        self.tool_names: list[str] | None = None

    @property
    def extension_severity(self) -> Severity:
        return "error" if self.strict_extensions else "extension"

    @property
    def ws_url(self) -> str:
        return "ws" + self.base_url.removeprefix("http") + "/ws"

    def get_json(self, path: str) -> tuple[int, Any]:
        response = self.http.get(path)
        try:
            return response.status_code, response.json()
        except ValueError:
            return response.status_code, None

    def open_ws(self) -> None:
        """Open `/ws` (the session the WebSocket checks share); `close()` closes it."""
        from websockets.sync.client import connect

        # entered as a context manager: websockets 17.1 deprecates connect() without one
        self.ws = connect(self.ws_url, open_timeout=self.timeout_s, max_size=64 * 1024 * 1024).__enter__()

    def send(self, message: dict[str, Any]) -> dict[str, Any]:
        """Send one WebSocket message and return the parsed reply."""
        self.ws.send(json.dumps(message))
        reply = json.loads(self.ws.recv(timeout=self.timeout_s))
        if not isinstance(reply, dict):
            raise ValueError(f"reply is not a JSON object: {reply!r}")
        return reply

    def close(self) -> None:
        if self.ws is not None:
            try:
                self.ws.close()
            except Exception:
                pass
            self.ws = None
        self.http.close()

    def __enter__(self) -> RuntimeProbe:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _reason(error: BaseException) -> str:
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _ok(name: str, message: str, **kwargs: Any) -> CheckResult:
    return CheckResult(name=name, passed=True, message=message, **kwargs)


def _fail(name: str, message: str, fix: str, **kwargs: Any) -> CheckResult:
    return CheckResult(name=name, passed=False, message=message, fix=fix, **kwargs)


def _skip(name: str, why: str, **kwargs: Any) -> CheckResult:
    return CheckResult(name=name, passed=False, skipped=True, message=f"skipped: {why}", **kwargs)


def _error_text(reply: dict[str, Any]) -> str:
    raw = reply.get("data")
    data: dict[str, Any] = raw if isinstance(raw, dict) else {}
    return f"[{data.get('code', '?')}] {data.get('message', reply.get('data'))}"


# --- HTTP discovery ----------------------------------------------------------------------


def check_health(probe: RuntimeProbe) -> CheckResult:
    """`GET /health` answers 200 `{"status": "healthy"}`."""
    name = "http.health"
    try:
        status, body = probe.get_json("/health")
    except httpx.HTTPError as e:
        return _fail(name, f"GET /health failed: {_reason(e)}", "Is the server running at this URL?")
    if status == 200 and isinstance(body, dict) and body.get("status") == "healthy":
        return _ok(name, "healthy")
    return _fail(name, f"GET /health answered {status} {body!r}", "/health must answer 200 {\"status\": \"healthy\"}")


_NOT_SANDBOXED = "no sandbox reported (the environment runs no agent commands)"


def check_isolation(probe: RuntimeProbe) -> CheckResult:
    """A sandboxed environment's `/health` says its sessions are isolated (`isolation.isolated`).

    A server that reports no `isolation` runs no sandbox (or predates the field): it passes, and
    `run_runtime_checks` leaves the rule out of the report. One opted out on purpose (`mode: none`)
    is a warning; any other unisolated report fails.
    """
    name = "http.isolation"
    try:
        _, body = probe.get_json("/health")
    except Exception as e:
        return _fail(name, f"GET /health failed: {_reason(e)}", "Is the server running at this URL?")
    report = body.get("isolation") if isinstance(body, dict) else None
    if not isinstance(report, dict):
        return _ok(name, _NOT_SANDBOXED)
    detail = str(report.get("detail", ""))
    if report.get("isolated") is True:
        return _ok(name, f"sessions isolated ({report.get('mode')}: {detail})")
    fix = ("Serve it where bubblewrap runs: as root in a container started by DockerProvider "
           "(or `openenv validate --image`), without OPENENV_UNSAFE_NO_ISOLATION / --no-isolation")
    message = f"sessions are NOT isolated ({detail}): agents can see and kill each other's processes and files"
    return _fail(name, message, fix, severity="warning" if report.get("mode") == "none" else "error")


SESSION_BOUNDS = {
    "session_memory": "the session's memory (sandbox.session_memory)",
    "session_processes": "the session's processes (sandbox.session_max_processes)",
    "workspace": "the session's folder size and files (sandbox.workspace_size, workspace_inodes)",
}
"""The session-wide bounds an isolated `/health` reports (`isolation_report()`), and what each holds."""


def check_session_bounds(probe: RuntimeProbe) -> CheckResult:
    """Each session-wide bound an isolated server's `/health` says is missing (`missing: <why>`) is
    a warning: its sessions run with the per-command limits only, so one session can take the
    host's memory or processes from the others.

    A server that reports no isolation, or no isolated one (`check_isolation` speaks for it),
    passes, and `run_runtime_checks` leaves the rule out of the report.
    """
    name = "http.session_bounds"
    try:
        _, body = probe.get_json("/health")
    except Exception as e:
        return _fail(name, f"GET /health failed: {_reason(e)}", "Is the server running at this URL?")
    report = body.get("isolation") if isinstance(body, dict) else None
    if not isinstance(report, dict) or report.get("isolated") is not True:
        return _ok(name, _NOT_SANDBOXED)
    missing = {
        bound: str(report[bound]).removeprefix("missing:").strip()
        for bound in SESSION_BOUNDS
        if isinstance(report.get(bound), str) and str(report[bound]).startswith("missing")
    }
    if not missing:
        return _ok(name, "session bounds held: " + "; ".join(f"{b}: {report.get(b)}" for b in SESSION_BOUNDS))
    message = "; ".join(f"no bound on {SESSION_BOUNDS[bound]}: {why}" for bound, why in missing.items())
    fix = ("Run the server as root with a writable cgroupfs (memory and pids controllers) and the right to mount "
           "tmpfs: DockerProvider or `openenv validate --image` start it so")
    return _fail(name, message, fix, severity="warning")


def check_metadata(probe: RuntimeProbe) -> CheckResult:
    """`GET /metadata` has a `name` and a `description`."""
    name = "http.metadata"
    try:
        status, body = probe.get_json("/metadata")
    except httpx.HTTPError as e:
        return _fail(name, f"GET /metadata failed: {_reason(e)}", "Serve GET /metadata")
    if status == 200 and isinstance(body, dict) and all(
        isinstance(body.get(field), str) and body[field].strip() for field in ("name", "description")
    ):
        return _ok(name, f"name {body['name']!r}")
    return _fail(name, f"GET /metadata answered {status} without a non-empty string name and description",
                 "Give the environment a name and a docstring (its description)")


def check_schema(probe: RuntimeProbe) -> CheckResult:
    """`GET /schema` has the action, observation and state JSON Schemas (and well-formed tools, if any)."""
    name = "http.schema"
    try:
        status, body = probe.get_json("/schema")
    except httpx.HTTPError as e:
        return _fail(name, f"GET /schema failed: {_reason(e)}", "Serve GET /schema")
    missing = [k for k in ("action", "observation", "state")
               if not (isinstance(body.get(k), dict) and body[k].get("type") == "object")] \
        if isinstance(body, dict) else ["action", "observation", "state"]
    if status != 200 or missing:
        return _fail(name, f"GET /schema answered {status}; missing or not object schemas (type 'object'): {missing}",
                     "/schema must hold the JSON Schemas of the action, observation and state models")
    tools = body.get("tools")
    if tools is not None and not (
        isinstance(tools, list) and all(isinstance(t, dict) and isinstance(t.get("name"), str) for t in tools)
    ):
        return _fail(name, "/schema `tools` is not a list of {name, description, input_schema}",
                     "List each tool with its name and input JSON Schema")
    probe.schema = body
    extra = f"; {len(tools)} tool(s)" if isinstance(tools, list) else ""
    return _ok(name, f"action, observation and state schemas{extra}")


def check_openapi(probe: RuntimeProbe) -> CheckResult:
    """`GET /openapi.json` declares a version and the HTTP routes `/reset`, `/step`, `/state`."""
    name = "http.openapi"
    try:
        status, body = probe.get_json("/openapi.json")
    except httpx.HTTPError as e:
        return _fail(name, f"GET /openapi.json failed: {_reason(e)}", "Serve the OpenAPI document")
    if status != 200 or not isinstance(body, dict) or not isinstance((body.get("info") or {}).get("version"), str):
        return _fail(name, f"GET /openapi.json answered {status} without info.version",
                     "Serve an OpenAPI document with info.version")
    paths = body.get("paths") or {}
    missing = [p for p in ("/reset", "/step", "/state") if p not in paths]
    if missing:
        return _fail(name, f"OpenAPI lists no {missing}", "Serve HTTP reset, step and state (OpenEnv's simulation mode)")
    return _ok(name, f"version {body['info']['version']}; /reset, /step, /state")


# --- the orchestrator's WebSocket ---------------------------------------------------------


def _envelope_problem(data: Any) -> str | None:
    """What is wrong with an observation reply's `data` (`{observation, reward, done}`), if anything."""
    if not isinstance(data, dict) or not isinstance(data.get("observation"), dict):
        return "data.observation is not an object"
    if not isinstance(data.get("done"), bool):
        return f"data.done is {data.get('done')!r}, not a boolean"
    if "reward" not in data:
        return "data.reward is missing (null when the environment gives none)"
    if not (data["reward"] is None or (isinstance(data["reward"], int | float) and not isinstance(data["reward"], bool))):
        return f"data.reward is {data['reward']!r}, not a number or null"
    return None



def check_ws_reset(probe: RuntimeProbe) -> CheckResult:
    """`/ws` accepts a connection and answers `reset` with an observation."""
    name = "ws.reset"
    try:
        probe.open_ws()
    except Exception as e:
        return _fail(name, f"cannot open {probe.ws_url}: {_reason(e)}", "Serve WebSocket /ws")
    try:
        reply = probe.send({"type": "reset", "data": {"seed": 0}})
    except Exception as e:
        return _fail(name, f"reset got no reply: {_reason(e)}", "Answer {type: reset} with an observation")
    if reply.get("type") == "error":
        return _fail(name, f"reset failed: {_error_text(reply)}", "Make reset(seed=0) work without task fields")
    data: Any = reply.get("data")
    problem = _envelope_problem(data) if reply.get("type") == "observation" else "not an observation"
    if problem:
        return _fail(name, f"reset answered {str(reply)[:200]} ({problem})",
                     "Reply {type: observation, data: {observation, reward, done}}")
    return _ok(name, f"observation (done={data.get('done')})")


def _tool_action(probe: RuntimeProbe) -> tuple[dict[str, Any], str] | None:
    tools = (probe.schema or {}).get("tools") or []
    if not tools:
        return None
    first = tools[0]
    schema = first.get("input_schema") or first.get("inputSchema") or {"type": "object"}
    arguments = sample_from_schema(schema)
    return {"type": "call_tool", "tool_name": first["name"], "arguments": arguments}, f"tool {first['name']!r}"


def check_ws_step(probe: RuntimeProbe) -> CheckResult:
    """`step` with a valid action (a call of the first tool, else one made from the action schema) gives an observation."""
    name = "ws.step"
    if probe.ws is None or probe.schema is None:
        return _skip(name, "needs /ws and /schema")
    try:
        made = _tool_action(probe)
        if made is None:
            made = sample_from_schema(probe.schema["action"]), "an action made from the action schema"
    except SampleError as e:
        return _skip(name, f"cannot make a valid action from the schema ({e})", severity="warning")
    action, what = made
    try:
        reply = probe.send({"type": "step", "data": action})
    except Exception as e:
        return _fail(name, f"step got no reply: {_reason(e)}", "Answer {type: step} with an observation")
    if reply.get("type") == "error":
        return _fail(name, f"step with {what} {json.dumps(action)[:120]} failed: {_error_text(reply)}",
                     "A step with a schema-valid action must give an observation")
    data: Any = reply.get("data")
    problem = _envelope_problem(data) if reply.get("type") == "observation" else "not an observation"
    if problem:
        return _fail(name, f"step answered {str(reply)[:200]} ({problem})",
                     "Reply {type: observation, data: {observation, reward, done}}")
    error = data["observation"].get("error") if action.get("type") == "call_tool" else None
    if isinstance(error, dict) and error.get("error_type") in ("tool_not_found", "invalid_args"):
        return _fail(name, f"{what} was refused: {error.get('error_type')}: {error.get('message')}",
                     "The tool's listed input schema must accept the arguments it describes")
    note = f" (the tool reported {error.get('error_type')})" if isinstance(error, dict) else ""
    return _ok(name, f"observation for {what}{note}")


def check_ws_state(probe: RuntimeProbe) -> CheckResult:
    """`state` answers with the state model."""
    name = "ws.state"
    if probe.ws is None:
        return _skip(name, "needs /ws")
    try:
        reply = probe.send({"type": "state"})
    except Exception as e:
        return _fail(name, f"state got no reply: {_reason(e)}", "Answer {type: state}")
    if reply.get("type") != "state" or not isinstance(reply.get("data"), dict):
        detail = _error_text(reply) if reply.get("type") == "error" else str(reply)[:200]
        return _fail(name, f"state answered {detail}", "Reply {type: state, data: {episode_id, step_count, ...}}")
    return _ok(name, f"state with {len(reply['data'])} field(s)")


def check_ws_checkpoint(probe: RuntimeProbe) -> CheckResult:
    """Extension: `checkpoint`, then `restore` in a second session, gives the same episode (its
    state's fields, id and step count), and the same observation for the same next action (the
    environment's `snapshot`/`restore` round trip). An episode the environment cannot keep is an
    unsupported extension; a restore that answers differently is a warning."""
    from websockets.sync.client import connect

    name = "ext.checkpoint"
    severity = probe.extension_severity
    if probe.ws is None:
        return _skip(name, "needs /ws", severity=severity)
    fix = ("Give the environment snapshot(folder) and restore(data, folder) methods that keep its whole "
           "episode (the default keeps state, episode_done and plain attributes only)")
    try:
        before = probe.send({"type": "state"})
        kept = probe.send({"type": "checkpoint", "data": {}})
    except Exception as e:
        return _fail(name, f"checkpoint got no reply: {_reason(e)}", "Answer {type: checkpoint}", severity=severity)
    code = (kept.get("data") or {}).get("code") if kept.get("type") == "error" else None
    if code == "NOT_RESET":  # ws.reset failed already, and says why
        return _skip(name, "needs an episode (reset failed)", severity=severity)
    if code == "SNAPSHOT_UNSUPPORTED":
        # optional: an environment that does not keep its episodes lacks a feature, as a server may
        return _fail(name, f"the episode cannot be checkpointed: {_error_text(kept)}", fix, severity="extension")
    if kept.get("type") != "checkpoint" or not isinstance((kept.get("data") or {}).get("handle"), str):
        detail = _error_text(kept) if kept.get("type") == "error" else str(kept)[:200]
        return _fail(name, f"checkpoints are not supported ({detail})",
                     "Optional: answer {type: checkpoint} with a handle (openenv-sdk servers do)", severity=severity)
    try:
        with connect(probe.ws_url, open_timeout=probe.timeout_s, max_size=64 * 1024 * 1024) as other:

            def ask(ws: Any, message: dict[str, Any]) -> dict[str, Any]:
                ws.send(json.dumps(message))
                reply: dict[str, Any] = json.loads(ws.recv(timeout=probe.timeout_s))
                return reply

            restored = ask(other, {"type": "restore", "data": {"handle": kept["data"]["handle"], "drop": True}})
            if restored.get("type") != "restored":
                return _fail(name, f"restore failed: {_error_text(restored)}", fix, severity=severity)
            # the same episode (a copy's session folder may differ: a path in the state may too)
            got, want = restored["data"].get("state") or {}, before.get("data") or {}
            if sorted(got) != sorted(want) or any(got.get(k) != want.get(k) for k in ("episode_id", "step_count")):
                return _fail(name, "the restored state is not the checkpointed episode's: "
                             f"{str(got)[:200]} != {str(want)[:200]}", fix, severity=severity)
            made = _tool_action(probe)
            action = made[0] if made is not None else (
                sample_from_schema(probe.schema["action"]) if probe.schema is not None else None)
            if action is not None:
                first, second = probe.send({"type": "step", "data": action}), ask(other, {"type": "step", "data": action})
                if json.dumps(first, sort_keys=True) != json.dumps(second, sort_keys=True):
                    return _fail(name, "after restore the same action gave another observation: "
                                 f"{json.dumps(second)[:160]} != {json.dumps(first)[:160]}",
                                 f"{fix}; keep random or timed state in the snapshot", severity="warning")
    except SampleError:
        pass
    except Exception as e:
        return _fail(name, f"restore in a second session failed: {_reason(e)}", fix, severity=severity)
    return _ok(name, "checkpoint and restore keep the episode (same state, same next observation)",
               severity=severity)


def check_ws_invalid_action(probe: RuntimeProbe) -> CheckResult:
    """An invalid action gets a typed `VALIDATION_ERROR`, and the session goes on."""
    name = "ws.invalid_action"
    if probe.ws is None:
        return _skip(name, "needs /ws")
    try:
        reply = probe.send({"type": "step", "data": {INVALID_FIELD: True}})
        code = (reply.get("data") or {}).get("code") if isinstance(reply.get("data"), dict) else None
        if reply.get("type") != "error" or code != "VALIDATION_ERROR":
            return _fail(name, f"an invalid action got {reply.get('type')!r} (code {code!r}), not a VALIDATION_ERROR",
                         "Validate every action against the action model (pydantic, extra='forbid') before step")
        after = probe.send({"type": "state"})
    except Exception as e:
        return _fail(name, f"the session did not survive an invalid action: {_reason(e)}",
                     "Answer a bad action with an error reply and keep the connection open")
    if after.get("type") != "state":
        return _fail(name, "the session stopped answering after an invalid action",
                     "Keep the session usable after an error reply")
    return _ok(name, "VALIDATION_ERROR, and the session goes on")


def check_ws_request_id(probe: RuntimeProbe) -> CheckResult:
    """Extension: a request's `id` is echoed on its reply."""
    name = "ext.ws_request_id"
    severity = probe.extension_severity
    if probe.ws is None:
        return _skip(name, "needs /ws", severity=severity)
    try:
        reply = probe.send({"type": "state", "id": "openenv-validate-1"})
    except Exception as e:
        return _fail(name, f"no reply to a message with an id: {_reason(e)}", "Echo `id` on replies", severity=severity)
    if reply.get("id") != "openenv-validate-1" or reply.get("type") != "state":
        detail = _error_text(reply) if reply.get("type") == "error" else "no id on the reply"
        return _fail(name, f"request ids are not supported ({detail})",
                     "Optional: echo a request's `id` on its reply (openenv-sdk servers do)", severity=severity)
    try:
        error = probe.send({"type": "openenv_validate_unknown", "id": 8})
    except Exception as e:
        return _fail(name, f"no reply to an unknown message type with an id: {_reason(e)}",
                     "Answer it with an UNKNOWN_TYPE error reply", severity=severity)
    if error.get("type") != "error" or error.get("id") != 8:
        return _fail(name, f"an error reply does not echo the request id: {str(error)[:200]}",
                     "Echo `id` on error replies too", severity=severity)
    return _ok(name, "replies (errors too) echo the request id", severity=severity)


def check_ws_close(probe: RuntimeProbe) -> CheckResult:
    """`close` ends the session: the server closes the socket (code 1000)."""
    from websockets.exceptions import ConnectionClosed

    name = "ws.close"
    if probe.ws is None:
        return _skip(name, "needs /ws")
    ws, probe.ws = probe.ws, None
    try:
        ws.send(json.dumps({"type": "close"}))
        extra = ws.recv(timeout=probe.timeout_s)
    except ConnectionClosed as e:
        code = e.rcvd.code if e.rcvd is not None else None
        if code in (1000, None):
            return _ok(name, f"socket closed by the server (code {code})")
        return _fail(name, f"socket closed with code {code}", "Close with code 1000 after {type: close}")
    except TimeoutError:
        return _fail(name, f"the socket stayed open {probe.timeout_s:.0f}s after close",
                     "Close the socket after {type: close}")
    except Exception as e:
        return _fail(name, f"close failed: {_reason(e)}", "Close the socket after {type: close}")
    finally:
        try:
            ws.close()
        except Exception:
            pass
    return _fail(name, f"close was answered with a message: {str(extra)[:120]}", "Close the socket; send nothing")


# --- the agent's MCP ----------------------------------------------------------------------


def check_mcp_jsonrpc(probe: RuntimeProbe) -> CheckResult:
    """`POST /mcp` answers a plain JSON-RPC `tools/list` (OpenEnv's clients); no tool has a reserved name."""
    name = "mcp.tools_list"
    try:
        response = probe.http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
                                   headers={"accept": "application/json"})
        body = response.json()
    except (httpx.HTTPError, ValueError) as e:
        return _fail(name, f"POST /mcp tools/list failed: {_reason(e)}", "Serve JSON-RPC tools/list at POST /mcp")
    tools = (body.get("result") or {}).get("tools") if isinstance(body, dict) else None
    if not isinstance(tools, list):
        return _fail(name, f"tools/list answered {str(body)[:200]}", "Answer tools/list with {result: {tools: [...]}}")
    malformed = [t for t in tools if not (isinstance(t, dict) and isinstance(t.get("name"), str)
                                          and isinstance(t.get("inputSchema"), dict))]
    if malformed:
        return _fail(name, f"tools/list has tools without a name and an inputSchema: {str(malformed)[:200]}",
                     "List each tool as MCP's Tool: {name, description, inputSchema}")
    names = [t["name"] for t in tools]
    probe.tool_names = names
    clash = sorted(set(names) & RESERVED_NAMES)
    if clash:
        return _fail(name, f"tools named {clash}: reset, step, state and close are the orchestrator's",
                     "Rename those tools")
    listed = [str(t.get("name")) for t in (probe.schema or {}).get("tools") or []]
    if listed and sorted(listed) != sorted(names):
        return _fail(name, f"/mcp lists {sorted(names)} but /schema lists {sorted(listed)}",
                     "Serve the same tools on /mcp and /schema")
    return _ok(name, f"{len(names)} tool(s): {', '.join(names) or 'none'}")


def check_mcp_official(probe: RuntimeProbe) -> CheckResult:
    """Extension: the official MCP client's `initialize` and `tools/list` work at `/mcp` (streamable HTTP)."""
    import anyio

    name = "ext.mcp_client"
    severity = probe.extension_severity

    async def session() -> tuple[str, list[str]]:
        with MCP_IMPORT_LOCK:
            from mcp import ClientSession
            from mcp.client.streamable_http import streamable_http_client

        with anyio.fail_after(probe.timeout_s):
            async with streamable_http_client(probe.base_url + "/mcp") as streams:
                read, write = streams[0], streams[1]
                async with ClientSession(read, write, read_timeout_seconds=probe.timeout_s) as client:
                    init = await client.initialize()
                    listed = await client.list_tools()
        server = getattr(init, "server_info", None) or getattr(init, "serverInfo", None)
        return str(getattr(server, "name", None) or ""), [t.name for t in listed.tools]

    try:
        server_name, names = anyio.run(session)
    except BaseException as e:  # the client raises exception groups; Ctrl-C still stops us
        if isinstance(e, KeyboardInterrupt | SystemExit):
            raise
        return _fail(name, f"the official MCP client could not initialize at /mcp ({_reason(e)[:160]})",
                     "Optional for OpenEnv servers: serve standard MCP (streamable HTTP) at /mcp", severity=severity)
    if not server_name:
        return _fail(name, "initialize named no server (serverInfo.name is empty)",
                     "Give the MCP server a name (openenv-sdk servers use the environment's)", severity=severity)
    if probe.tool_names is not None and sorted(names) != sorted(probe.tool_names):
        return _fail(name, f"MCP client lists {sorted(names)}, JSON-RPC lists {sorted(probe.tool_names)}",
                     "Serve the same tools to every MCP client", severity=severity)
    return _ok(name, f"initialize ({server_name}) and tools/list: {len(names)} tool(s)", severity=severity)


_NAMED: tuple[tuple[str, Callable[[RuntimeProbe], CheckResult]], ...] = (
    ("http.health", check_health),
    ("http.isolation", check_isolation),
    ("http.session_bounds", check_session_bounds),
    ("http.metadata", check_metadata),
    ("http.schema", check_schema),
    ("http.openapi", check_openapi),
    ("ws.reset", check_ws_reset),
    ("ws.step", check_ws_step),
    ("ws.state", check_ws_state),
    ("ext.checkpoint", check_ws_checkpoint),
    ("ws.invalid_action", check_ws_invalid_action),
    ("ext.ws_request_id", check_ws_request_id),
    ("ws.close", check_ws_close),
    ("mcp.tools_list", check_mcp_jsonrpc),
    ("ext.mcp_client", check_mcp_official),
)

RUNTIME_CHECKS: tuple[Callable[[RuntimeProbe], CheckResult], ...] = tuple(check for _, check in _NAMED)
"""Every protocol rule, in the order they run (the WebSocket checks share one session)."""


def run_runtime_checks(probe: RuntimeProbe) -> Iterator[CheckResult]:
    """Run `RUNTIME_CHECKS` against the probe's server, yielding each result.

    When `/health` does not answer, the remaining checks are skipped.
    """
    for index, check in enumerate(RUNTIME_CHECKS):
        result = check(probe)
        if check in (check_isolation, check_session_bounds) and result.message == _NOT_SANDBOXED:
            continue  # the rule applies to (isolated) sandboxed environments only
        yield result
        if check is check_health and not result.passed:
            for rest_name, _ in _NAMED[index + 1:]:
                severity = probe.extension_severity if rest_name.startswith("ext.") else "error"
                yield _skip(rest_name, "the server is not healthy", severity=severity)
            return
