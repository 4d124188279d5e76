"""Helpers for testing environments and clients against a real server.

`serve_app` runs any ASGI app (what `create_app` returns, say) with uvicorn on a free loopback
port, in a thread of the test's own process, so a test talks to it over real HTTP and WebSocket
connections and can still reach into the environment's objects.

`labelled_builds` gives a test session's images a label of its own and removes exactly those
images (and the containers made from them) when it ends, never another run's.

Example:
    >>> from openenv_sdk import create_app
    >>> from openenv_sdk.client import GenericEnvClient
    >>> from openenv_sdk.loader import load_environment
    >>> app = create_app(load_environment("environments/echo").env_cls)
    >>> with serve_app(app) as url, GenericEnvClient(url) as env:  # doctest: +SKIP
    ...     _ = env.reset()
    ...     result = env.step({"type": "call_tool", "tool_name": "echo", "arguments": {"message": "hi"}})
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import uvicorn

from .errors import ProviderError

__all__ = ["DEFAULT_SERVE_TIMEOUT_S", "TEST_SESSION_LABEL", "labelled_builds", "remove_labelled", "serve_app"]

DEFAULT_SERVE_TIMEOUT_S = 10.0
"""How long `serve_app` waits for the server to start, and then to stop, in seconds."""


def _limits_of(app: Any) -> dict[str, Any]:
    """uvicorn's limits in step with an app from `create_app` (`{}` for any other app)."""
    config = getattr(getattr(getattr(app, "state", None), "openenv", None), "config", None)
    if config is None:
        return {}
    from .server import uvicorn_limits

    return uvicorn_limits(config)


@contextlib.contextmanager
def serve_app(app: Any, *, host: str = "127.0.0.1", timeout_s: float = DEFAULT_SERVE_TIMEOUT_S) -> Iterator[str]:
    """Serve `app` with uvicorn on `host` and a free port, in a daemon thread; yields the base URL.

    The socket is bound before uvicorn starts, so no other process can take the port meanwhile,
    and the URL is usable as soon as the block starts. On leaving the block uvicorn is asked to
    exit and is waited for up to `timeout_s` (a connection still open past that is abandoned
    with the daemon thread).

    Args:
        app: an ASGI application.
        host: the address to listen on; an IPv6 address (`"::1"`) listens on IPv6.
        timeout_s: how long to wait for uvicorn to start, and then to stop.

    Yields:
        The base URL, `http://HOST:PORT` (the host in brackets for IPv6).

    Raises:
        ProviderError: uvicorn did not start within `timeout_s`, or exited first (the app's
            startup failed, say: uvicorn logs why).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, 0))
        port = sock.getsockname()[1]
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", **_limits_of(app)))
        exits: list[SystemExit] = []

        def run() -> None:
            try:
                server.run(sockets=[sock])
            except SystemExit as e:  # how uvicorn ends when the app's startup fails
                exits.append(e)

        thread = threading.Thread(target=run, name=f"uvicorn-{port}", daemon=True)
        thread.start()
        try:
            deadline = time.monotonic() + timeout_s
            while not server.started:
                if not thread.is_alive():
                    cause = exits[0] if exits else None
                    raise ProviderError(f"uvicorn exited before it started on {host} port {port}") from cause
                if time.monotonic() > deadline:
                    raise ProviderError(f"uvicorn did not start on {host} port {port} within {timeout_s} s")
                time.sleep(0.005)
            yield f"http://[{host}]:{port}" if family == socket.AF_INET6 else f"http://{host}:{port}"
        finally:
            server.should_exit = True
            thread.join(timeout_s)
    finally:
        sock.close()


TEST_SESSION_LABEL = "org.openenv.test-session"
"""The label key `labelled_builds` puts on a test session's images (its value: the session's id)."""


@contextlib.contextmanager
def labelled_builds(*, remove: bool = True, key: str = TEST_SESSION_LABEL) -> Iterator[str]:
    """Within the block, every image built carries the label `key=<a fresh id>`, in this process
    or in a child process (`openenv build`), through `$OPENENV_BUILD_LABELS`; at its end, with
    `remove`, the containers and images carrying it are removed (`remove_labelled`). The
    variable is restored; the engine keeps the cached layers, so the next run builds quickly.

    Yields:
        The label, `KEY=VALUE`.
    """
    from .build import BUILD_LABELS_ENV

    label = f"{key}={uuid.uuid4().hex[:12]}"
    before = os.environ.get(BUILD_LABELS_ENV)
    os.environ[BUILD_LABELS_ENV] = f"{before},{label}" if before else label
    try:
        yield label
    finally:
        if before is None:
            os.environ.pop(BUILD_LABELS_ENV, None)
        else:
            os.environ[BUILD_LABELS_ENV] = before
        if remove:
            remove_labelled(label)


def remove_labelled(label: str) -> tuple[int, int]:
    """Remove the containers (a container carries its image's labels), then the images, that carry
    `label` (`KEY=VALUE`), and nothing else; returns how many of each.

    Raises:
        EngineUnavailableError: the `docker` package is missing, or the engine does not answer.
    """
    from .containers.engine import connect_engine

    engine = connect_engine()
    import docker.errors  # there, since connect_engine found it

    try:
        containers = engine.containers.list(all=True, filters={"label": label})
        for container in containers:
            with contextlib.suppress(docker.errors.NotFound):  # gone meanwhile (auto-removed)
                container.remove(force=True)  # force: one still running is killed
        images = engine.images.list(filters={"label": label})
        for image in images:
            with contextlib.suppress(docker.errors.NotFound):
                engine.images.remove(image.id, force=True)  # force: one image may carry several test tags
        return len(containers), len(images)
    finally:
        engine.close()
