"""The browser playground at `/web`: a static page that plays the server through its public routes.

The page (`web/index.html`, `web/app.js`, `web/style.css`) is plain HTML, JavaScript and CSS:
no build step, nothing fetched from elsewhere at run time. It reads `/metadata` and `/schema`,
makes input forms from the tools' JSON Schemas, runs `reset` / `step` / `state` over HTTP with
the `X-OpenEnv-Session` header, calls tools over MCP (`POST /mcp?session=<mcp_token>`, as an
agent would) and shows the episode's transcript (`POST /call/transcript`). It is on when
`ServerConfig(web=True)`, `openenv serve --web`, or the manifest's `server.web: true`.
"""

from __future__ import annotations

from importlib import resources

from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from ..errors import OpenEnvError

__all__ = ["WEB_PATH", "mount_playground"]

WEB_PATH = "/web"

_ASSETS = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
}

# Everything the page loads or calls is on this server; nothing else may be reached from it.
_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; object-src 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-cache",
}


def _load_assets() -> dict[str, bytes]:
    """The page's files, read once.

    Raises:
        OpenEnvError: the files are missing from this install (a wheel built without them).
    """
    folder = resources.files("openenv_sdk.server") / "web"
    try:
        return {name: (folder / name).read_bytes() for name in _ASSETS}
    except FileNotFoundError as e:
        raise OpenEnvError(
            f"the playground's files are missing from this install of openenv-sdk ({e.filename}): "
            "its package data must include openenv_sdk/server/web/*; reinstall it, or serve without --web"
        ) from e


def mount_playground(app: FastAPI) -> None:
    """Add the playground's routes to `app` (outside the OpenAPI document: they are not the API).

    `GET /web` redirects to `/web/` (relative, so a path prefix added by a proxy is kept);
    `GET /web/` is the page and `GET /web/<asset>` its script and style sheet.
    """
    assets = _load_assets()

    async def page(request: Request) -> Response:
        name = request.path_params.get("asset") or "index.html"
        if name not in assets:
            return Response(status_code=404, content=f"no such playground file: {name}")
        return Response(assets[name], media_type=_ASSETS[name], headers=_HEADERS)

    async def redirect(request: Request) -> Response:
        return RedirectResponse("web/", status_code=307)

    app.router.routes.append(Route(WEB_PATH, endpoint=redirect, methods=["GET"]))
    app.router.routes.append(Route(f"{WEB_PATH}/", endpoint=page, methods=["GET"]))
    app.router.routes.append(Route(WEB_PATH + "/{asset}", endpoint=page, methods=["GET"]))
