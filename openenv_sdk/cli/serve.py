"""`openenv serve ENV_DIR`: serve an environment folder with uvicorn.

The orchestrator's API (reset, step, state, close, sessions, orchestrator calls such as
`run_agent`) always needs a token unless told otherwise: `--orchestrator-token-file`, else
`OPENENV_ORCHESTRATOR_TOKEN` (how providers pass theirs), else a new random one, printed at start.
`--no-auth` (or `OPENENV_NO_AUTH=1`, for images whose command is fixed) serves it open, with a
warning: a tokenless server is a choice, never a default.
"""

from __future__ import annotations

import errno
import os
import secrets
import socket
from pathlib import Path
from typing import Annotated, Any

import typer

from ..errors import OpenEnvError
from ..types import NO_AUTH_VAR, ORCHESTRATOR_TOKEN_FILE_VAR
from ._output import console, debug_enabled, escape, fail

ENV_DIR_VAR = "OPENENV_SERVE_DIR"
OVERRIDES_VAR = "OPENENV_SERVE_OVERRIDES"


def build_app_from_env() -> Any:
    """uvicorn factory for worker processes: reads the folder and overrides from the environment."""
    import json

    from ..loader import load_environment
    from ..server import create_app

    loaded = load_environment(os.environ[ENV_DIR_VAR])
    if loaded.env_cls is None:
        from ..server._auth import take_token_from_environ

        if take_token_from_environ() is not None:
            console.print("[yellow]Note:[/] an OpenEnv `app:` cannot require the orchestrator token; it is ignored.")
        return loaded.app
    overrides = json.loads(os.environ.get(OVERRIDES_VAR, "{}"))
    # The orchestrator token, when there is one, comes through OPENENV_ORCHESTRATOR_TOKEN, which
    # create_app reads and removes from this process's environment.
    app = create_app(loaded.env_cls, config=_server_config(loaded.manifest.server, overrides), readme=loaded.readme)
    if loaded.manifest.sandbox is not None:
        app.state.openenv_isolation = _require_isolation()  # reported by /health
    return app


def _require_isolation() -> dict[str, str | bool]:
    """A sandboxed environment's server starts only where its sessions can be isolated (or the
    operator opted out): raises `IsolationUnavailable` here, at startup, not at the first reset.
    Returns what `/health` reports."""
    from ..sandbox import isolation_mode, isolation_report

    isolation_mode()
    return isolation_report()


def _server_config(settings: Any, overrides: dict[str, Any]) -> Any:
    from ..server import ServerConfig

    config = {
        "max_sessions": settings.max_sessions,
        "idle_timeout_s": settings.idle_timeout_s,
        "tool_timeout_s": settings.tool_timeout_s,
        "unreset_grace_s": settings.unreset_grace_s,
        "max_mcp_sessions": settings.max_mcp_sessions,
        "max_message_bytes": settings.max_message_bytes,
        "max_tool_result_bytes": settings.max_tool_result_bytes,
        "max_transcript_bytes": settings.max_transcript_bytes,
        "web": settings.web,
    }
    config.update({k: v for k, v in overrides.items() if v is not None})
    return ServerConfig.model_validate(config)


def _isolation_ok(no_isolation: bool) -> bool:
    """Refuse to serve a sandboxed environment that cannot isolate its sessions, unless opted out."""
    from ..sandbox import OPT_OUT_ENV, IsolationUnavailable, isolation_mode

    if no_isolation:
        os.environ[OPT_OUT_ENV] = "1"  # inherited by the workers
    try:
        mode = isolation_mode()
    except IsolationUnavailable as e:
        fail(str(e), hint="Inside a container, start it with DockerProvider or `openenv validate --image`")
        return False
    if mode.value == "none":
        console.print(
            "[yellow]Warning:[/] agent commands are NOT isolated "
            f"({OPT_OUT_ENV}=1): sessions share a user and can see and kill each other. Development only."
        )
    return True


def _port_problem(host: str, port: int) -> str | None:
    """Why `host:port` cannot be listened on (in use, a bad address), or `None` when it can.

    Probed with a bind as uvicorn makes it (SO_REUSEADDR), so that a taken port is reported in
    one line before "Serving ...", not as uvicorn's traceback after it.
    """
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as e:
        return f"cannot listen on {host!r}: {e.strerror}"
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                return f"port {port} on {host} is already in use"
            return f"cannot listen on {host}:{port}: {e.strerror}"
    return None


class _TokenProblem(Exception):
    """The token options cannot be served as given (the message says why)."""


def _orchestrator_token(token_file: Path | None, no_auth: bool, enforceable: bool) -> str | None:
    """The token the server requires (None: open, as asked).

    Raises:
        _TokenProblem: contradicting options, or an unreadable or empty token file.
    """
    from ..server import ORCHESTRATOR_TOKEN_VAR

    given = os.environ.get(ORCHESTRATOR_TOKEN_VAR) or None
    if no_auth:
        if token_file is not None or given is not None:
            source = "--orchestrator-token-file" if token_file is not None else ORCHESTRATOR_TOKEN_VAR
            raise _TokenProblem(f"--no-auth and {source} contradict each other: give a token, or --no-auth, not both")
        console.print(
            "[yellow]Warning:[/] no orchestrator token (--no-auth): anyone who reaches this port can reset, "
            "step, close and run agents in any session. Development only."
        )
        return None
    if not enforceable:
        if token_file is not None or given is not None:
            console.print("[yellow]Note:[/] an OpenEnv `app:` cannot require the orchestrator token; it is ignored.")
        return None  # an OpenEnv `app:` serves its own routes
    if token_file is not None:
        try:
            token = token_file.expanduser().read_text().strip()
        except OSError as e:
            raise _TokenProblem(f"Cannot read the orchestrator token file {token_file}: {e.strerror}") from None
        if not token:
            raise _TokenProblem(f"The orchestrator token file {token_file} is empty")
        return token
    if given is not None:
        return given
    token = secrets.token_urlsafe(32)
    console.print(
        f"Orchestrator token: [bold]{token}[/]\n"
        "  Clients send it as `Authorization: Bearer <token>`: GenericEnvClient(url, orchestrator_token=...), "
        f"or `export {ORCHESTRATOR_TOKEN_VAR}=<token>` for `openenv` commands given --env URL.\n"
        "  Fix it with --orchestrator-token-file; serve without one only on purpose: --no-auth.",
        soft_wrap=True,
    )
    return token


def serve(
    env_dir: Annotated[Path, typer.Argument(help="Environment folder (holds openenv.yaml).")],
    host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int | None, typer.Option(help="Port; defaults to the manifest's `port`.")] = None,
    workers: Annotated[int | None, typer.Option(help="Worker processes; defaults to the manifest's.")] = None,
    max_sessions: Annotated[int | None, typer.Option(help="Most concurrent sessions per worker.")] = None,
    idle_timeout_s: Annotated[float | None, typer.Option(help="Close sessions idle this many seconds.")] = None,
    tool_timeout_s: Annotated[float | None, typer.Option(help="The most one tool call may take, in seconds.")] = None,
    web: Annotated[
        bool | None,
        typer.Option("--web/--no-web", help="Serve the browser playground at /web; defaults to the manifest's.", show_default=False),
    ] = None,
    orchestrator_token_file: Annotated[
        Path | None,
        typer.Option(
            help="File holding the orchestrator's token: reset/step/state/close, sessions and orchestrator "
            "calls then need `Authorization: Bearer <token>` (also: the OPENENV_ORCHESTRATOR_TOKEN variable).",
            envvar=ORCHESTRATOR_TOKEN_FILE_VAR,  # for images whose command is fixed: a mounted Kubernetes Secret
        ),
    ] = None,
    no_auth: Annotated[
        bool,
        typer.Option(
            "--no-auth",
            help="Serve without an orchestrator token: anyone who reaches the port can reset, step and run "
            f"agents. Default: a token is required (a new one is printed if none is given). Also {NO_AUTH_VAR}=1.",
        ),
    ] = False,
    no_isolation: Annotated[
        bool,
        typer.Option(
            "--no-isolation",
            help="Run a sandboxed environment's agent commands without isolation where bubblewrap cannot run "
            "(sets OPENENV_UNSAFE_NO_ISOLATION=1). Development only: sessions then see and can kill each other.",
        ),
    ] = False,
    log_level: Annotated[str, typer.Option(help="uvicorn log level.")] = "info",
) -> None:
    """Serve an environment folder: WebSocket /ws, HTTP reset/step/state, and MCP at /mcp.

    Examples:
        openenv serve environments/echo --port 8000
        openenv serve environments/wordle --max-sessions 4096 --idle-timeout-s 120
        openenv serve environments/echo --web   # then open http://127.0.0.1:8000/web
        openenv serve environments/echo --orchestrator-token-file ~/.openenv/token
        openenv serve environments/echo --no-auth   # tokenless, on purpose (development)
    """
    import json

    import uvicorn

    from ..loader import load_environment
    from ..server import ORCHESTRATOR_TOKEN_VAR, uvicorn_limits

    try:
        loaded = load_environment(env_dir)
    except OpenEnvError as e:
        if debug_enabled():
            raise
        fail(str(e), hint="Check it with: openenv validate " + str(env_dir))
        return
    if loaded.manifest.sandbox is not None and not _isolation_ok(no_isolation):
        return
    port = port if port is not None else loaded.manifest.port
    problem = _port_problem(host, port)
    if problem is not None:
        fail(problem, hint=f"Stop what listens there (ss -ltnp 'sport = :{port}'), or choose another port: --port N")
        return
    try:
        token = _orchestrator_token(orchestrator_token_file, no_auth or os.environ.get(NO_AUTH_VAR) == "1", loaded.env_cls is not None)
    except _TokenProblem as e:
        fail(str(e))
        return
    os.environ.pop(ORCHESTRATOR_TOKEN_VAR, None)
    if token is not None:
        os.environ[ORCHESTRATOR_TOKEN_VAR] = token  # read, and removed, by each worker's create_app
    settings = loaded.manifest.server
    workers = workers or settings.workers
    os.environ[ENV_DIR_VAR] = str(loaded.path)
    os.environ[OVERRIDES_VAR] = json.dumps(
        {"max_sessions": max_sessions, "idle_timeout_s": idle_timeout_s, "tool_timeout_s": tool_timeout_s, "web": web}
    )
    if workers > 1:
        console.print(
            "[yellow]Note:[/] with several workers each holds its own sessions: WebSocket sessions work, "
            "but HTTP sessions and MCP tokens need sticky routing to the worker that made them."
        )
    kind = loaded.env_cls.__name__ if loaded.env_cls else f"OpenEnv app {loaded.manifest.app}"
    console.print(f"Serving [bold]{escape(loaded.manifest.name)}[/] ({escape(kind)}) on http://{host}:{port}  (Ctrl-C stops)")
    wants_web = settings.web if web is None else web
    if wants_web:
        if loaded.env_cls is not None:
            console.print(f"Playground: http://{host}:{port}/web")
            if token is not None:
                console.print("[yellow]Note:[/] a browser cannot send the orchestrator token: the playground needs --no-auth.")
        else:
            console.print("[yellow]Note:[/] the playground needs an `environment:` class; an OpenEnv `app:` serves its own.")
    uvicorn.run(
        "openenv_sdk.cli.serve:build_app_from_env",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_level=log_level,
        **uvicorn_limits(_server_config(settings, {})),
        ws_ping_interval=20.0,
        ws_ping_timeout=20.0,
        timeout_graceful_shutdown=5,
    )
