"""`openenv serve ENV_DIR`: serve an environment folder with uvicorn."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer

from ..errors import OpenEnvError
from ._output import console, debug_enabled, fail

ENV_DIR_VAR = "OPENENV_SERVE_DIR"
OVERRIDES_VAR = "OPENENV_SERVE_OVERRIDES"


def build_app_from_env() -> Any:
    """uvicorn factory for worker processes: reads the folder and overrides from the environment."""
    import json

    from ..loader import load_environment
    from ..server import ServerConfig, create_app

    loaded = load_environment(os.environ[ENV_DIR_VAR])
    if loaded.env_cls is None:
        return loaded.app
    settings = loaded.manifest.server
    config = ServerConfig(
        max_sessions=settings.max_sessions,
        idle_timeout_s=settings.idle_timeout_s,
        tool_timeout_s=settings.tool_timeout_s,
        web=settings.web,
    )
    overrides = json.loads(os.environ.get(OVERRIDES_VAR, "{}"))
    config = config.model_copy(update={k: v for k, v in overrides.items() if v is not None})
    return create_app(loaded.env_cls, config=ServerConfig.model_validate(config.model_dump()), readme=loaded.readme)


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
    log_level: Annotated[str, typer.Option(help="uvicorn log level.")] = "info",
) -> None:
    """Serve an environment folder: WebSocket /ws, HTTP reset/step/state, and MCP at /mcp.

    Examples:
        openenv serve environments/echo --port 8000
        openenv serve environments/wordle --max-sessions 4096 --idle-timeout-s 120
        openenv serve environments/echo --web   # then open http://127.0.0.1:8000/web
    """
    import json

    import uvicorn

    from ..loader import load_environment

    try:
        loaded = load_environment(env_dir)
    except OpenEnvError as e:
        if debug_enabled():
            raise
        fail(str(e), hint="Check it with: openenv validate " + str(env_dir))
        return
    settings = loaded.manifest.server
    workers = workers or settings.workers
    port = port if port is not None else loaded.manifest.port
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
    console.print(f"Serving [bold]{loaded.manifest.name}[/] ({kind}) on http://{host}:{port}  (Ctrl-C stops)")
    wants_web = settings.web if web is None else web
    if wants_web:
        if loaded.env_cls is not None:
            console.print(f"Playground: http://{host}:{port}/web")
        else:
            console.print("[yellow]Note:[/] the playground needs an `environment:` class; an OpenEnv `app:` serves its own.")
    uvicorn.run(
        "openenv_sdk.cli.serve:build_app_from_env",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_level=log_level,
        ws_max_size=64 * 1024 * 1024,
        ws_ping_interval=20.0,
        ws_ping_timeout=20.0,
        timeout_graceful_shutdown=5,
    )
