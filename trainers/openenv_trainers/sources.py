"""`EnvSource`: one environment server (a URL, a local folder, or an image) shared by many sessions.

Training runs many episodes at once. Starting one server per episode would cost a process or a
container each; an `EnvSource` starts one server (when it is given a folder or an image) and
hands out clients that each hold one session on it. `restart()` replaces the server (the rollout
worker's circuit breaker uses it); clients made before a restart must be made again.

Given `fleet=` (a `RayFleet`, or anything that is a `SessionPool`), the source starts nothing:
each client is a session on the fleet's least-loaded live server, and the fleet (Ray) replaces
lost servers itself.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Protocol, Self, runtime_checkable

from openenv_sdk.client import AsyncGenericEnvClient, GenericEnvClient
from openenv_sdk.errors import ClientStateError
from openenv_sdk.loader import load_grader  # re-exported: `openenv_trainers.load_grader`
from openenv_sdk.providers.base import Provider
from openenv_sdk.rubric import Rubric

__all__ = ["EnvSource", "SessionPool", "load_grader"]


@runtime_checkable
class SessionPool(Protocol):
    """Many servers of one environment behind one handle (`openenv_sdk.fleet.RayFleet`)."""

    @property
    def env_dir(self) -> Path:
        """The environment's folder (its `openenv.yaml` names the grader)."""
        ...

    def client(self, **kwargs: Any) -> GenericEnvClient:
        """A new blocking client (one session) on one of the servers, chosen by load."""
        ...

    def async_client(self, **kwargs: Any) -> AsyncGenericEnvClient:
        """A new asyncio client (one session) on one of the servers, chosen by load."""
        ...


class EnvSource:
    """Where episodes' sessions come from: a running server, or one this source starts.

    Example:
        >>> source = EnvSource(env_dir="environments/wordle")  # doctest: +SKIP
        >>> with source.client() as env:
        ...     env.reset(task_id=3)
    """

    def __init__(
        self,
        base_url: str | None = None,
        *,
        env_dir: str | Path | None = None,
        image: str | None = None,
        provider: Any | None = None,
        fleet: SessionPool | None = None,
        startup_timeout_s: float = 120.0,
        client_timeout_s: float | None = None,
        name: str | None = None,
    ) -> None:
        """Describe the source; nothing starts until `start()` (or the first client).

        Give exactly one of `base_url`, `env_dir`, `image`, `provider`, `fleet`.

        Args:
            base_url: a running server, e.g. `http://127.0.0.1:8000`.
            env_dir: an environment folder, served in a local process (`openenv serve`).
            image: an environment image, run as one container (`DockerProvider`).
            provider: any SDK provider (`start() -> base_url`, `stop()`, `is_alive()`).
            fleet: a started `RayFleet`: every client opens on its least-loaded live server, with
                the fleet's client timeout unless `client_timeout_s` is given. The fleet is the
                caller's: `close()` leaves it running, and `restart()` is the fleet's own (Ray's).
            startup_timeout_s: the longest wait for the server to become healthy, in seconds.
            client_timeout_s: each client's longest wait for one reply, in seconds; default 60.
            name: a label for metrics and errors; default the folder, image or URL.
        """
        options = (("base_url", base_url), ("env_dir", env_dir), ("image", image), ("provider", provider), ("fleet", fleet))
        given = [k for k, v in options if v is not None]
        if len(given) != 1:
            raise ValueError(
                f"EnvSource needs exactly one of base_url, env_dir=, image=, provider=, fleet= (got {given or 'none'})"
            )
        self.env_dir = Path(env_dir) if env_dir is not None else (fleet.env_dir if fleet is not None else None)
        self.image = image
        self.fleet = fleet
        self._timeout_s = client_timeout_s  # None: the fleet's own, else 60 s
        self.client_timeout_s = client_timeout_s if client_timeout_s is not None else 60.0
        if provider is None and env_dir is not None:
            from openenv_sdk.providers.local import LocalProcessProvider

            provider = LocalProcessProvider(env_dir, startup_timeout_s=startup_timeout_s)
        elif provider is None and image is not None:
            from openenv_sdk.providers.docker import DockerProvider

            provider = DockerProvider(image, startup_timeout_s=startup_timeout_s)
        self.provider = provider
        self._base_url = base_url.rstrip("/") if base_url is not None else None
        # A provider may name itself (a fleet member: `echo[0]`); one of a kind is its class's name.
        self.name = name or str(
            env_dir
            or image
            or base_url
            or (f"fleet-{fleet.env_dir.name}" if fleet is not None else None)
            or getattr(provider, "name", None)
            or type(provider).__name__
        )
        self.generation = 0
        """Counts restarts: a client made at an older generation talks to a server that is gone."""
        self._lock = threading.Lock()
        self._closed = False

    def __repr__(self) -> str:
        return f"EnvSource({self.name!r})"

    @property
    def url(self) -> str | None:
        """The server's base URL now: the provider's (a fleet member's follows Ray's replacements),
        else the one given; `None` for a fleet (many servers)."""
        url = getattr(self.provider, "base_url", None)
        return str(url).rstrip("/") if url else self._base_url

    @property
    def host_address(self) -> str | None:
        """Where the server's processes reach this host (the provider's `host_address`); `None`
        for a server given by URL (or a fleet), whose network this source does not know."""
        provider = self.provider
        return provider.host_address if isinstance(provider, Provider) else None

    @property
    def node(self) -> str | None:
        """Where the server runs now, when the provider says (a fleet member's Ray node id); else `None`."""
        return getattr(self.provider, "node_id", None)

    @property
    def can_restart(self) -> bool:
        """Whether `restart()` can replace the server (a folder or an image; not a bare URL or a fleet)."""
        return self.provider is not None

    def start(self) -> str:
        """Start the server if this source owns one; returns its base URL.

        Raises:
            ClientStateError: the source is closed, or a fleet (many URLs: use `client()`).
        """
        with self._lock:
            if self._closed:
                raise ClientStateError(f"{self!r} is closed")
            if self.fleet is not None:
                raise ClientStateError(f"{self!r} is a fleet of servers: it has no one URL; open sessions with client()")
            if self._base_url is None:
                assert self.provider is not None
                self._base_url = str(self.provider.start()).rstrip("/")
            return self._base_url

    def restart(self) -> str:
        """Stop the server and start a fresh one (a new generation).

        Raises:
            ClientStateError: the source is a bare URL or a fleet (nothing of ours to restart), or closed.
        """
        with self._lock:
            if self._closed:
                raise ClientStateError(f"{self!r} is closed")
            if self.provider is None:
                what = "a fleet: Ray replaces its servers" if self.fleet is not None else "a URL"
                raise ClientStateError(f"{self!r} is {what}: there is no server of ours to restart")
            self.provider.stop()
            self._base_url = str(self.provider.start()).rstrip("/")
            self.generation += 1
            return self._base_url

    def client(self, **kwargs: Any) -> GenericEnvClient:
        """A new blocking client (one session) of this source's server (a fleet's least-loaded one).

        Its `call_tool` goes on the session's WebSocket (`tool_transport="websocket"`): a rollout
        calls tools on the agent's behalf, and one round trip on the open connection costs a
        fraction of an MCP client session's (pass `tool_transport="mcp"` for the official client).
        """
        kwargs.setdefault("tool_transport", "websocket")
        if self.fleet is not None:
            return self.fleet.client(**self._fleet_kwargs(kwargs))
        kwargs.setdefault("timeout_s", self.client_timeout_s)
        url = self.start()
        kwargs.setdefault("orchestrator_token", getattr(self.provider, "orchestrator_token", None))
        return GenericEnvClient(url, **kwargs)

    def async_client(self, **kwargs: Any) -> AsyncGenericEnvClient:
        """A new asyncio client (one session) of this source's server (a fleet's least-loaded one);
        tools on the session's WebSocket, as `client()`'s."""
        kwargs.setdefault("tool_transport", "websocket")
        if self.fleet is not None:
            return self.fleet.async_client(**self._fleet_kwargs(kwargs))
        kwargs.setdefault("timeout_s", self.client_timeout_s)
        url = self.start()
        kwargs.setdefault("orchestrator_token", getattr(self.provider, "orchestrator_token", None))
        return AsyncGenericEnvClient(url, **kwargs)

    def _fleet_kwargs(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            if self._closed:
                raise ClientStateError(f"{self!r} is closed")
        if self._timeout_s is not None:
            kwargs.setdefault("timeout_s", self._timeout_s)
        return kwargs

    def tools(self) -> list[Any]:
        """The environment's tools (`ToolSchema`s from `/schema`)."""
        with self.client() as env:
            return list(env.schema().tools)

    def grader(self) -> Rubric | Any:
        """The host-side grader of this source's folder (`grader:` in its `openenv.yaml`).

        Raises:
            ValueError: the source is not a folder, or its manifest names no grader.
        """
        if self.env_dir is None:
            raise ValueError(f"{self!r} is not an environment folder: pass the grader (a rubric) explicitly")
        return load_grader(self.env_dir)

    def close(self) -> None:
        """Stop the server this source started. Safe to call twice."""
        with self._lock:
            self._closed = True
            if self.provider is not None:
                self.provider.stop()

    def __enter__(self) -> Self:
        if self.fleet is None:  # a fleet is started by its owner
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
