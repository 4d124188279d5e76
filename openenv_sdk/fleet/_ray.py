"""`RayFleet`: environment servers placed by Ray across a cluster's nodes, one handle on them all.

    RayFleet
     ├── one Ray actor per server (`ServerActor`), asking for the manifest's resources;
     │   it runs `openenv serve` (or, given `image=`, a container in the node's engine)
     │   on its node and exits when the server dies, and Ray
     │   restarts it (`max_restarts`), on any node that has the resources
     ├── a monitor thread that asks every actor where its server is (`endpoint()`), and
     │   marks a server down when its actor does not answer in `probe_timeout_s`
     └── `client()`: a new session on the live server with the fewest open sessions

Ray does the placing, the restarting and the failure detection; the fleet only keeps the list
of live servers and their load. A session on a server that is lost ends with the client's own
typed errors (`TransportError`, or `RequestTimeout` after the client's `timeout_s`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import ray
from ray.exceptions import GetTimeoutError, RayError

from openenv_sdk.client import DEFAULT_TIMEOUT_S, AsyncGenericEnvClient, GenericEnvClient
from openenv_sdk.errors import ClientStateError, ProviderError
from openenv_sdk.manifest import load_manifest
from openenv_sdk.providers.base import Provider
from openenv_sdk.providers.docker import NetworkPolicy

from ._actor import ServerActor

__all__ = ["FleetMember", "FleetServer", "RayFleet"]

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class FleetServer:
    """One server of the fleet, as the monitor last saw it."""

    index: int
    """Its slot in the fleet (stable across restarts of its actor)."""
    url: str | None
    """Its base URL, or `None` while it is down or restarting."""
    node_id: str | None
    """The Ray node it runs on (last known)."""
    generation: int
    """How many times its server was replaced (a restart gives a new URL and token)."""
    sessions: int
    """Clients handed out on it and not yet closed."""
    server_pid: int | None
    """The server's process id on its node (last known; `None` for a container)."""
    container_id: str | None = None
    """The server's container in its node's engine (last known; `None` for a process)."""
    orchestrator_token: str | None = dataclasses.field(default=None, repr=False)
    """The server's orchestrator token, for a client made by hand (never in `repr`)."""


@dataclasses.dataclass
class _Slot:
    index: int
    actor: Any
    url: str | None = None
    token: str | None = None
    node_id: str | None = None
    actor_pid: int | None = None
    server_pid: int | None = None
    container_id: str | None = None
    generation: int = -1
    sessions: int = 0
    pending: Any = None
    pending_since: float = 0.0
    retired: bool = False


class FleetMember(Provider):
    """One server of a `RayFleet`, seen as a provider (`start`, `stop`, `is_alive`, token).

    The fleet owns the server: `stop()` does not stop it, and `start()` returns its current URL,
    waiting up to the fleet's `startup_timeout_s` while Ray replaces a lost one.
    """

    def __init__(self, fleet: RayFleet, slot: _Slot) -> None:
        self._fleet = fleet
        self._slot = slot

    @property
    def base_url(self) -> str | None:
        """The server's URL now, or `None` while it is down."""
        return self._slot.url

    @property
    def orchestrator_token(self) -> str | None:
        """The running server's orchestrator token (a replacement has a new one)."""
        return self._slot.token

    @property
    def name(self) -> str:
        """`<env>[<index>]`: the server's slot in the fleet (a label for metrics; `EnvSource` takes it)."""
        return f"{self._fleet.env_dir.name}[{self._slot.index}]"

    @property
    def node_id(self) -> str | None:
        """The Ray node the server runs on (last known; a replacement may run on another)."""
        return self._slot.node_id

    def start(self) -> str:
        """The server's URL, once it is up.

        Raises:
            ProviderError: it was not up within the fleet's `startup_timeout_s`, or it left the fleet.
        """
        deadline = time.monotonic() + self._fleet.startup_timeout_s
        while True:
            if self._slot.retired:
                raise ProviderError(f"server {self._slot.index} is no longer part of {self._fleet!r}")
            url = self._slot.url
            if url is not None:
                return url
            if time.monotonic() > deadline:
                raise ProviderError(
                    f"server {self._slot.index} of {self._fleet!r} was not up again within "
                    f"{self._fleet.startup_timeout_s:g} s (startup_timeout_s)"
                )
            time.sleep(0.05)

    def stop(self) -> None:
        """Nothing: the fleet stops its servers (`RayFleet.close`, `scale`)."""

    def is_alive(self) -> bool:
        """Whether the fleet sees the server up now."""
        return self._slot.url is not None and not self._slot.retired

    def __repr__(self) -> str:
        return f"<FleetMember {self._slot.index} of {self._fleet!r}>"


class RayFleet:
    """Environment servers on a Ray cluster, with clients spread over them by load.

    Example:
        >>> with RayFleet("environments/echo", size=4) as fleet:  # doctest: +SKIP
        ...     with fleet.client() as env:
        ...         env.reset()
    """

    def __init__(
        self,
        env_dir: str | Path,
        *,
        size: int,
        image: str | None = None,
        container_network: NetworkPolicy | None = None,
        num_cpus: float | None = None,
        memory_bytes: int | None = None,
        resources: Mapping[str, float] | None = None,
        max_restarts: int = -1,
        host: str | None = None,
        address: str | None = None,
        startup_timeout_s: float = 120.0,
        client_timeout_s: float = DEFAULT_TIMEOUT_S,
        probe_interval_s: float = 0.5,
        probe_timeout_s: float = 2.0,
    ) -> None:
        """Describe the fleet; nothing starts until `start()` (or `with`).

        Args:
            env_dir: the environment folder (holds `openenv.yaml`); it must be at the same
                path on every node (a shared folder, or the same checkout).
            size: how many servers to start.
            image: run each server as a container of this environment image (`openenv build`)
                in its node's engine (`DOCKER_HOST`, else Podman's or Docker's socket), through
                `DockerProvider`; every node needs the image. Default: `openenv serve ENV_DIR`
                as a process. The manifest in `env_dir` still gives the resources asked of Ray.
            container_network: the containers' network policy: `none` (no egress; the server is
                reached at the container's address on its node's internal bridge, which only
                that node routes to) or `bridge` (egress; the port is published on the node's
                IP, which every node reaches); default the image's manifest `network.policy`.
            num_cpus: CPUs each server's actor asks Ray for; default the manifest's `resources.cpus`.
            memory_bytes: memory each actor asks Ray for, in bytes; default the manifest's
                `resources.memory`.
            resources: custom Ray resources each actor asks for, e.g. `{"env_node": 1}`.
            max_restarts: how often Ray may restart one server's actor; -1 is without limit.
            host: the address each server binds; default the node's IP (from `ray.util`).
            address: the Ray cluster to join when Ray is not initialized yet (`ray.init(address)`).
            startup_timeout_s: longest wait, in seconds, for all servers of `start()` or `scale()`.
            client_timeout_s: each client's longest wait for one reply, in seconds.
            probe_interval_s: how often, in seconds, the monitor asks each actor for its server.
            probe_timeout_s: a server whose actor has not answered for this long is down.

        Raises:
            ValueError: `size` is below 1, or a timeout is not positive.
            ManifestError: the folder's `openenv.yaml` is missing or invalid.
        """
        if size < 1:
            raise ValueError(f"a fleet needs at least one server, got size={size}")
        for name, value in (
            ("startup_timeout_s", startup_timeout_s),
            ("client_timeout_s", client_timeout_s),
            ("probe_interval_s", probe_interval_s),
            ("probe_timeout_s", probe_timeout_s),
        ):
            if not value > 0:
                raise ValueError(f"{name} must be positive, got {value}")
        self.env_dir = Path(env_dir).resolve()
        manifest = load_manifest(self.env_dir / "openenv.yaml")
        self.num_cpus = manifest.resources.cpus if num_cpus is None else num_cpus
        self.memory_bytes = manifest.resources.memory_bytes if memory_bytes is None else memory_bytes
        self.resources = dict(resources or {})
        self.image = image
        self._container_network = container_network
        self.max_restarts = max_restarts
        self._host = host
        self._address = address
        self._size = size
        self.startup_timeout_s = startup_timeout_s
        self.client_timeout_s = client_timeout_s
        self._probe_interval_s = probe_interval_s
        self._probe_timeout_s = probe_timeout_s
        self._slots: list[_Slot] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._monitor: threading.Thread | None = None
        self._started_ray = False
        self._closed = False

    # --- public -------------------------------------------------------------------------------

    def start(self) -> Self:
        """Start `size` servers and wait until every one answers.

        Raises:
            ClientStateError: the fleet is closed.
            ProviderError: not all servers came up in `startup_timeout_s` (e.g. no node has the
                resources they ask for); the servers already started are stopped.
        """
        if self._closed:
            raise ClientStateError("this RayFleet is closed; make a new one")
        if not ray.is_initialized():
            ray.init(address=self._address, log_to_driver=False)
            self._started_ray = True
        try:
            self.scale(self._size)
        except BaseException:
            self.close()
            raise
        self._monitor = threading.Thread(target=self._watch, name="openenv-fleet-monitor", daemon=True)
        self._monitor.start()
        return self

    @property
    def size(self) -> int:
        """How many servers the fleet keeps (up or restarting)."""
        with self._lock:
            return sum(not s.retired for s in self._slots)

    @property
    def urls(self) -> list[str]:
        """The base URLs of the servers that are up now."""
        with self._lock:
            return [s.url for s in self._slots if s.url is not None and not s.retired]

    def servers(self) -> list[FleetServer]:
        """Every server of the fleet, up or not, as the monitor last saw it."""
        with self._lock:
            return [
                FleetServer(
                    index=s.index,
                    url=s.url,
                    node_id=s.node_id,
                    generation=s.generation,
                    sessions=s.sessions,
                    server_pid=s.server_pid,
                    container_id=s.container_id,
                    orchestrator_token=s.token,
                )
                for s in self._slots
                if not s.retired
            ]

    def load(self) -> dict[str, int]:
        """Open sessions per live server's URL."""
        with self._lock:
            return {s.url: s.sessions for s in self._slots if s.url is not None and not s.retired}

    def client(self, **kwargs: Any) -> GenericEnvClient:
        """A new blocking client (one session) on the live server with the fewest open sessions.

        Closing the client frees its place. Keyword arguments go to `GenericEnvClient`.

        Raises:
            ClientStateError: the fleet is not started, or closed.
            ProviderError: no server is up now (all lost or restarting).
        """
        slot, generation = self._pick()
        kwargs.setdefault("timeout_s", self.client_timeout_s)
        client = GenericEnvClient(slot.url, orchestrator_token=slot.token, **kwargs)
        client.add_close_hook(lambda: self._release(slot, generation))
        return client

    def async_client(self, **kwargs: Any) -> AsyncGenericEnvClient:
        """A new asyncio client (one session) on the least-loaded live server; see `client`."""
        slot, generation = self._pick()
        kwargs.setdefault("timeout_s", self.client_timeout_s)
        client = AsyncGenericEnvClient(slot.url, orchestrator_token=slot.token, **kwargs)
        client.add_close_hook(lambda: self._release(slot, generation))
        return client

    def members(self) -> list[FleetMember]:
        """One provider per server of the fleet, for code that takes one server per source.

        `EnvSource(provider=member)` gives `EnvRolloutWorker` one source (and one circuit
        breaker) per server; the source's `restart()` then waits for Ray's replacement.
        """
        with self._lock:
            return [FleetMember(self, s) for s in self._slots if not s.retired]

    def scale(self, size: int) -> None:
        """Grow or shrink the fleet to `size` servers.

        Growing waits until the new servers answer. Shrinking stops the servers with the fewest
        open sessions first; sessions still open on them end with `TransportError`.

        Raises:
            ValueError: `size` is below 1.
            ClientStateError: the fleet is closed.
            ProviderError: new servers did not come up in `startup_timeout_s`.
        """
        if size < 1:
            raise ValueError(f"a fleet needs at least one server, got size={size}")
        if self._closed:
            raise ClientStateError("this RayFleet is closed; make a new one")
        with self._lock:
            live = [s for s in self._slots if not s.retired]
            if size < len(live):
                doomed = sorted(live, key=lambda s: s.sessions)[: len(live) - size]
                for slot in doomed:
                    slot.retired = True
                    slot.url = None
                new: list[_Slot] = []
            else:
                doomed = []
                new = [_Slot(index=len(self._slots) + i, actor=self._new_actor()) for i in range(size - len(live))]
                self._slots.extend(new)
        self._stop_actors(doomed)
        if new:
            self._await_first_endpoints(new)

    def close(self) -> None:
        """Stop every server and its actor (and Ray, if `start()` initialized it). Safe to call twice."""
        self._closed = True
        self._stop.set()
        if self._monitor is not None:
            self._monitor.join(timeout=self._probe_interval_s + self._probe_timeout_s + 5)
        with self._lock:
            slots = [s for s in self._slots if not s.retired]
            for slot in slots:
                slot.retired = True
                slot.url = None
        self._stop_actors(slots)
        if self._started_ray:
            ray.shutdown()
            self._started_ray = False

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        what = self.env_dir.name if self.image is None else self.image
        return f"<RayFleet {what} {len(self.urls)}/{self.size} up>"

    # --- internals ----------------------------------------------------------------------------

    def _new_actor(self) -> Any:
        remote_cls = ray.remote(ServerActor).options(
            num_cpus=self.num_cpus,
            memory=self.memory_bytes,
            resources=self.resources or None,
            max_restarts=self.max_restarts,
            max_task_retries=0,
            max_concurrency=4,  # endpoint() answers while stop() runs
        )
        # A container's liveness is a call to the engine: asked less often than a process's poll.
        watch_interval_s = 0.2 if self.image is None else 0.5
        return remote_cls.remote(
            str(self.env_dir), self._host, self.startup_timeout_s, watch_interval_s, self.image, self._container_network
        )

    def _await_first_endpoints(self, slots: list[_Slot]) -> None:
        refs = {slot.actor.endpoint.remote(): slot for slot in slots}
        ready, waiting = ray.wait(list(refs), num_returns=len(refs), timeout=self.startup_timeout_s)
        failures: list[str] = []
        for ref in ready:
            try:
                self._update(refs[ref], ray.get(ref))
            except RayError as e:
                failures.append(f"server {refs[ref].index}: {e}")
        if waiting:
            failures.append(
                f"{len(waiting)} server(s) not up within {self.startup_timeout_s:g} s (startup_timeout_s); "
                f"each asks Ray for num_cpus={self.num_cpus:g}, memory={self.memory_bytes} bytes, "
                f"resources={self.resources}: check `ray status` for a node that has them"
            )
        if failures:
            raise ProviderError("RayFleet could not start every server:\n" + "\n".join(failures))

    def _update(self, slot: _Slot, endpoint: Mapping[str, Any]) -> None:
        with self._lock:
            if slot.retired:
                return
            if endpoint["actor_pid"] != slot.actor_pid or endpoint["url"] != slot.url:
                if slot.actor_pid != endpoint["actor_pid"]:
                    slot.generation += 1
                    slot.sessions = 0  # the old server's sessions are gone with it
                slot.actor_pid = endpoint["actor_pid"]
            slot.url, slot.token, slot.node_id = endpoint["url"], endpoint["token"], endpoint["node_id"]
            slot.server_pid, slot.container_id = endpoint["server_pid"], endpoint["container_id"]

    def _pick(self) -> tuple[_Slot, int]:
        if self._closed or not self._slots:
            raise ClientStateError("the RayFleet is not started, or closed")
        with self._lock:
            up = [s for s in self._slots if s.url is not None and not s.retired]
            if not up:
                raise ProviderError(f"no server of {self!r} is up now (lost or restarting); try again shortly")
            slot = min(up, key=lambda s: s.sessions)
            slot.sessions += 1
            return slot, slot.generation

    def _release(self, slot: _Slot, generation: int) -> None:
        with self._lock:
            if slot.generation == generation and slot.sessions > 0:
                slot.sessions -= 1

    def _watch(self) -> None:
        while not self._stop.wait(self._probe_interval_s):
            try:
                self._probe()
            except Exception:  # keep watching: a monitor that died would hand out dead servers
                logger.exception("RayFleet monitor: probing the servers failed")

    def _probe(self) -> None:
        with self._lock:
            slots = [s for s in self._slots if not s.retired]
            now = time.monotonic()
            for slot in slots:
                if slot.pending is None:
                    slot.pending, slot.pending_since = slot.actor.endpoint.remote(), now
        if not slots:
            return
        pending = [s.pending for s in slots]
        ready, _ = ray.wait(pending, num_returns=len(pending), timeout=self._probe_interval_s)
        done = set(ready)
        for slot in slots:
            ref = slot.pending
            if ref in done:
                slot.pending = None
                try:
                    self._update(slot, ray.get(ref))
                except RayError:  # the actor died; Ray restarts it, or it is out of restarts
                    with self._lock:
                        slot.url = None
            elif time.monotonic() - slot.pending_since > self._probe_timeout_s:
                with self._lock:
                    slot.url = None  # keep waiting on the same call: it answers once restarted

    def _stop_actors(self, slots: list[_Slot]) -> None:
        refs = [slot.actor.stop.remote() for slot in slots]
        with contextlib.suppress(RayError, GetTimeoutError):
            ray.wait(refs, num_returns=len(refs), timeout=10)
        for slot in slots:
            with contextlib.suppress(RayError, ValueError):
                ray.kill(slot.actor, no_restart=True)
