"""Run an environment image in a container engine (Docker Engine or Podman).

Limits and network policy come from the arguments, else from the manifest the image
carries in its `org.openenv.manifest` label (`resources`, `network.policy`, `port`,
`variables`), else from the manifest's defaults.

Network policy and how the host reaches the server:

* `none` (default): the container joins an *internal* bridge network (`openenv-internal`,
  created on first use): it has no route out (no egress, no DNS to the outside), and the
  host reaches the server at the container's own IP on that bridge. Engines do not publish
  ports of containers on internal networks, and `network_mode="none"` would leave no way in
  at all, so this is how "no network" and "reachable server" go together. It needs the host
  to route to the container's IP: true for Docker Engine and Podman on Linux, not for Docker
  Desktop (macOS/Windows), where `network="bridge"` is needed.
* `bridge`: the engine's default network, full egress; the port is published on
  127.0.0.1 (or `publish_host`, e.g. a node's address that other machines reach) at a
  random host port.
* `allowlist`: as `bridge` for the container (the server's egress proxy needs a way out);
  sandboxed commands still reach only the manifest's `network.allow` hosts through that proxy
  (`openenv_sdk.sandbox.Egress`), never the container's network itself.

A sandboxed environment (manifest `sandbox:`) runs each agent command in bubblewrap, as root
without a user namespace, then drops it to the session's uid with setpriv. Its container gets
exactly what that needs, found by experiment on Podman 4.3 with runc (rootful, and with a user
namespace), and nothing else (`SANDBOX_CAPABILITIES`; every other capability stays dropped):

* `SYS_ADMIN`: new pid, mount, IPC, UTS and cgroup namespaces, bubblewrap's mounts, pivot_root;
* `NET_ADMIN`: bringing up the loopback of each command's new network namespace;
* `SETUID`, `SETGID`: setpriv's switch to the session's uid and gid;
* `SETPCAP`: setpriv's drop of the bounding set (without it the command keeps a full bounding set);
* `CHOWN`: handing session folders to the session's uid and taking them back;
* `KILL`: killing what a session's uid left running when the session ends;
* `DAC_OVERRIDE`, `FOWNER`: the server (and bubblewrap, before it drops to the session's uid)
  entering and copying folders the session's uid made private: bubblewrap's `--chdir` into a
  session folder, a grading copy of a workspace with its modes (`cp -a`).

None of them reaches agent code: setpriv clears every capability set before the command runs.

`no-new-privileges` stays, and so do the engine's default seccomp profile and masked `/proc`
paths: privileged bubblewrap needs neither `seccomp=unconfined` nor `unmask=/proc/*` (Podman) /
`systempaths=unconfined` (Docker), which only a user namespace made inside the container would
(the proc mount is then refused as "too revealing"). Engines that confine containers with
AppArmor (Docker's and Podman's default profiles deny `mount`) also get `apparmor=unconfined`,
only where the engine reports AppArmor. The agent's commands get none of this: setpriv clears
every capability, the bounding set included, and sets no-new-privs. Where the engine maps no
user namespace, each container also gets its own random range of session uids
(`OPENENV_SANDBOX_UID_BASE`), so that its sessions share no uid with the host's or another
container's (a shared uid shares its process limit, and the host's cleanup would kill it).

The container is removed by `stop()`, on leaving the `with` block (Ctrl-C included) and at
interpreter exit (`atexit`). It is killed, not only stopped, when the process is killed
with SIGKILL; such leftovers carry the label `org.openenv.managed=1`.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import secrets
import threading
import uuid
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from openenv_sdk.containers.engine import connect_engine
from openenv_sdk.containers.errors import (
    ContainerExitedError,
    ContainerRunError,
    StartupTimeoutError,
)
from openenv_sdk.containers.labels import (
    LABEL_IMAGE,
    LABEL_MANAGED,
    LABEL_MANIFEST,
    LABEL_OWNER_PID,
    LABEL_PORT,
    manifest_from_labels,
)
from openenv_sdk.manifest import Manifest, parse_memory_size
from openenv_sdk.providers.base import Provider
from openenv_sdk.providers.health import wait_for_health
from openenv_sdk.types import NO_AUTH_VAR, ORCHESTRATOR_TOKEN_VAR

if TYPE_CHECKING:
    import docker
    from docker.models.containers import Container

__all__ = ["DEFAULT_STARTUP_TIMEOUT_S", "INTERNAL_NETWORK", "SANDBOX_CAPABILITIES", "DockerProvider", "NetworkPolicy"]

NetworkPolicy = Literal["none", "bridge"]
DEFAULT_STARTUP_TIMEOUT_S = 60.0
INTERNAL_NETWORK = "openenv-internal"
_LOG_TAIL_LINES = 40
SANDBOX_CAPABILITIES = (
    "SYS_ADMIN", "NET_ADMIN", "SETUID", "SETGID", "SETPCAP", "CHOWN", "KILL", "DAC_OVERRIDE", "FOWNER",
)  # fmt: skip
"""Capabilities added (to none) for a sandboxed environment's container; see the module docstring."""


class DockerProvider(Provider):
    """Runs one container of an environment image and gives the URL of its server.

    Example:
        >>> with DockerProvider("openenv-echo_env:latest") as provider:  # doctest: +SKIP
        ...     httpx.get(f"{provider.base_url}/health")
    """

    def __init__(
        self,
        image: str,
        *,
        port: int | None = None,
        network: NetworkPolicy | None = None,
        mem_limit: str | None = None,
        cpus: float | None = None,
        pids_limit: int | None = None,
        env: Mapping[str, str] | None = None,
        read_only: bool = False,
        name: str | None = None,
        startup_timeout_s: float = DEFAULT_STARTUP_TIMEOUT_S,
        stop_timeout_s: float = 3.0,
        engine: docker.DockerClient | None = None,
        docker_host: str | None = None,
        orchestrator_token: bool = True,
        publish_host: str = "127.0.0.1",
    ) -> None:
        """Describe the container; nothing runs until `start()`.

        Args:
            image: image tag or id, e.g. from `openenv_sdk.build.build_image`.
            port: the server's port inside the container; default the image's manifest `port`.
            network: `none` (no egress), `bridge` or `allowlist` (egress); default the manifest's
                `network.policy`. See the module docstring.
            mem_limit: memory limit such as `"512m"`; default the manifest's `resources.memory`.
            cpus: CPU cores; default the manifest's `resources.cpus`.
            pids_limit: most processes/threads; default the manifest's `resources.pids`.
            env: environment variables, added to the manifest's `variables`.
            read_only: mount the root file system read-only (with a writable tmpfs `/tmp`).
            name: container name; default `openenv-<image>-<random>`.
            startup_timeout_s: longest wait, in seconds, for `GET /health` to answer 200.
            stop_timeout_s: grace period, in seconds, between SIGTERM and SIGKILL on stop.
            engine: a connected docker SDK client; default `connect_engine(docker_host=...)`.
            orchestrator_token: start the server with a new orchestrator token (see
                `orchestrator_token`): only clients given this provider can reset, step or close.
                False serves it open, for clients that cannot send the token (OpenEnv's).
            docker_host: engine address when `engine` is not given.
            publish_host: the host address a `bridge` container's port is published on, and the
                host of its URL; another machine's address makes it reachable from there
                (`RayFleet` publishes on its node's IP). Unused with policy `none`.
        """
        if startup_timeout_s <= 0:
            raise ValueError(f"startup_timeout_s must be positive, got {startup_timeout_s}")
        self.image = image
        self._port = port
        self._network = network
        self._mem_limit = mem_limit
        self._cpus = cpus
        self._pids_limit = pids_limit
        self._env = dict(env or {})
        self._read_only = read_only
        self._name = name
        self.startup_timeout_s = startup_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self._engine = engine
        self._owns_engine = engine is None
        self._docker_host = docker_host
        self._container: Container | None = None
        self._base_url: str | None = None
        self._token: str | None = None
        self._use_token = orchestrator_token
        self._publish_host = publish_host
        self._lock = threading.Lock()

    # --- public ---------------------------------------------------------------------------

    @property
    def orchestrator_token(self) -> str | None:
        """The running container's orchestrator token (new for every container; `None` when
        stopped). Clients given this provider send it; the server removes it from its own
        environment at startup, so the processes it starts never inherit it."""
        return self._token

    @property
    def base_url(self) -> str | None:
        """`http://host:port` of the running server, or `None` before `start()` / after `stop()`."""
        return self._base_url

    @property
    def container_id(self) -> str | None:
        """The running container's id, or `None`."""
        return self._container.id if self._container is not None else None

    def start(self) -> str:
        """Run the container and wait for `GET /health` to answer 200.

        Raises:
            EngineUnavailableError: no engine answers.
            ContainerRunError: the image is missing, or the engine refused the container.
            ContainerExitedError: the container exited before it was healthy (with its log tail).
            StartupTimeoutError: no 200 from `/health` within `startup_timeout_s`.
        """
        with self._lock:
            if self._base_url is not None:
                return self._base_url
            try:
                return self._start()
            except BaseException:  # Ctrl-C included: never leave the container behind
                self._remove()
                raise

    def stop(self) -> None:
        """Stop and remove the container (a no-op when none runs)."""
        with self._lock:
            self._remove()

    def is_alive(self) -> bool:
        """Whether the container is running (an exited or removed one is not)."""
        container = self._container
        if container is None:
            return False
        try:
            container.reload()
        except Exception:  # NotFound or a lost engine: not alive either way
            return False
        return container.status == "running"

    def check_alive(self) -> None:
        """Raise if the container has died since it started (e.g. the server crashed or ran out of memory).

        Raises:
            ContainerExitedError: with the exit status and the last log lines.
            ContainerRunError: `start()` was never called, or the provider was stopped.
        """
        container = self._container
        if container is None:
            raise ContainerRunError(f"no container of {self.image!r} is running: call start() first")
        if not self.is_alive():
            code = self.exit_code()
            tail = self.logs_tail()
            oom = bool(container.attrs.get("State", {}).get("OOMKilled"))
            raise ContainerExitedError(
                f"container of {self.image!r} exited (status {code}{', out of memory' if oom else ''}); "
                + _log_tail_text(tail),
                container_id=container.id,
                log_tail=tail,
                exit_code=code,
            )

    @property
    def host_address(self) -> str | None:
        """The address at which processes in the container reach the host (its network's gateway),
        e.g. for a trainer's interception server listening on it or on `0.0.0.0`; `None` before
        `start()`. On the internal network (policy `none`) that is all the container reaches."""
        container = self._container
        if container is None:
            return None
        container.reload()
        networks = container.attrs.get("NetworkSettings", {}).get("Networks", {}) or {}
        for settings in networks.values():
            gateway = (settings or {}).get("Gateway")
            if gateway:
                return str(gateway)
        return None

    def logs_tail(self, lines: int = _LOG_TAIL_LINES) -> list[str]:
        """The last `lines` lines of the container's output (stdout and stderr)."""
        container = self._container
        if container is None:
            return []
        try:
            raw = container.logs(stdout=True, stderr=True, tail=lines)
        except Exception:
            return []
        return raw.decode("utf-8", "replace").splitlines()[-lines:]

    def exit_code(self) -> int | None:
        """The container's exit status once it has exited, else `None`."""
        container = self._container
        if container is None:
            return None
        try:
            container.reload()
        except Exception:
            return None
        state = container.attrs.get("State", {})
        return None if state.get("Running") else state.get("ExitCode")

    # --- internals --------------------------------------------------------------------------

    def _start(self) -> str:
        import docker.errors

        if self._engine is None:
            self._engine = connect_engine(docker_host=self._docker_host)
        engine = self._engine
        try:
            image = engine.images.get(self.image)
        except docker.errors.ImageNotFound:
            raise ContainerRunError(
                f"image {self.image!r} not found in the engine; build it first (openenv_sdk.build.build_image "
                "or `openenv build ENV_DIR`)"
            ) from None
        manifest = manifest_from_labels(image.labels) or Manifest(name=self.image)
        port = self._port or int((image.labels or {}).get(LABEL_PORT, manifest.port))
        policy = self._network or manifest.network.policy
        if policy not in ("none", "bridge", "allowlist"):
            raise ContainerRunError(
                f"network policy {policy!r} is not supported by DockerProvider; use 'none', 'bridge' or 'allowlist'"
            )
        cpus = self._cpus if self._cpus is not None else manifest.resources.cpus
        token = secrets.token_urlsafe(32) if self._use_token else None
        environment = {k: v for k, v in {**manifest.variables, **self._env}.items() if k not in (ORCHESTRATOR_TOKEN_VAR, NO_AUTH_VAR)}
        if token is not None:
            environment[ORCHESTRATOR_TOKEN_VAR] = token  # the server removes it from its environment
        else:
            environment[NO_AUTH_VAR] = "1"  # open on purpose (orchestrator_token=False); the image's serve has a token by default
        if manifest.sandbox:
            environment = {**_sandbox_uid_env(engine), **environment}  # the caller's own range wins
        options: dict[str, Any] = {
            "name": self._name or f"openenv-{_slug(self.image)}-{uuid.uuid4().hex[:8]}",
            # run by id (below), so the engine would report one of the image's tags, not the one asked for
            "labels": {LABEL_MANAGED: "1", LABEL_OWNER_PID: str(os.getpid()), LABEL_IMAGE: self.image},
            "environment": environment,
            "mem_limit": parse_memory_size(self._mem_limit or manifest.resources.memory),
            "nano_cpus": int(cpus * 1e9),
            "pids_limit": self._pids_limit or manifest.resources.pids,
            "cap_drop": ["ALL"],
            # A sandboxed environment's root server runs bubblewrap: see the module docstring.
            "cap_add": list(SANDBOX_CAPABILITIES) if manifest.sandbox else [],
            "security_opt": ["no-new-privileges", *(_sandbox_security_opts(engine) if manifest.sandbox else [])],
            "init": True,
        }
        if self._read_only:
            options["read_only"] = True
            options["tmpfs"] = {"/tmp": "rw,size=64m"}
        if policy in ("bridge", "allowlist"):  # allowlist: the server's proxy needs egress; commands reach only the list
            options["ports"] = {f"{port}/tcp": (self._publish_host, None)}
        else:
            options["network"] = _internal_network(engine)
        try:
            container = engine.containers.run(image.id or self.image, detach=True, **options)
        except docker.errors.DockerException as e:
            # `run` creates, then starts: a refused start would leave the created container behind.
            with contextlib.suppress(Exception):
                engine.containers.get(options["name"]).remove(force=True, v=True)
            raise ContainerRunError(f"the engine refused to run {self.image!r}: {e}") from e
        self._container = container
        _live.add(self)
        base_url = self._url(container, port, policy)
        outcome = wait_for_health(base_url, timeout_s=self.startup_timeout_s, is_alive=self.is_alive)
        if outcome == "dead":
            code = self.exit_code()
            tail = self.logs_tail()
            raise ContainerExitedError(
                _exited_before_serving(self.image, code, tail, openenv_image=LABEL_MANIFEST in (image.labels or {})),
                container_id=container.id,
                log_tail=tail,
                exit_code=code,
            )
        if outcome == "timeout":
            tail = self.logs_tail()
            raise StartupTimeoutError(
                f"{base_url}/health did not answer 200 within {self.startup_timeout_s:.0f}s "
                "(raise startup_timeout_s if the server is slow to start); last log lines:\n"
                + "\n".join(f"  | {line}" for line in tail),
                container_id=container.id,
                log_tail=tail,
            )
        self._base_url, self._token = base_url, token
        return base_url

    def _url(self, container: Container, port: int, policy: str) -> str:
        container.reload()
        if policy == "bridge":
            bindings = (container.ports or {}).get(f"{port}/tcp") or []
            if not bindings:
                raise ContainerRunError(
                    f"the engine published no host port for {port}/tcp",
                    container_id=container.id,
                    log_tail=self.logs_tail(),
                )
            return f"http://{self._publish_host}:{bindings[0]['HostPort']}"
        networks = container.attrs.get("NetworkSettings", {}).get("Networks", {})
        address = (networks.get(INTERNAL_NETWORK) or {}).get("IPAddress")
        if not address:
            raise ContainerRunError(
                f"the container got no address on the network {INTERNAL_NETWORK!r}",
                container_id=container.id,
                log_tail=self.logs_tail(),
            )
        return f"http://{address}:{port}"

    def _remove(self) -> None:
        container, self._container, self._base_url = self._container, None, None
        self._token = None
        _live.discard(self)
        if container is not None:
            with contextlib.suppress(Exception):  # already gone, or already stopped: removal below settles it
                container.stop(timeout=max(0, round(self.stop_timeout_s)))
            with contextlib.suppress(Exception):
                container.remove(force=True, v=True)
        if self._owns_engine and self._engine is not None:
            engine, self._engine = self._engine, None
            engine.close()

    def __del__(self) -> None:  # last resort; atexit and `with` are the real paths
        with contextlib.suppress(Exception):
            self._remove()


def _log_tail_text(tail: list[str]) -> str:
    if not tail:
        return "it printed nothing"
    return "last log lines:\n" + "\n".join(f"  | {line}" for line in tail)


def _exited_before_serving(image: str, code: int | None, tail: list[str], *, openenv_image: bool) -> str:
    """Why a container ended before `/health` answered, and what to do: an image that is not an
    environment's (no manifest label, or a command that ends at once) says so, rather than
    showing an empty log tail."""
    message = f"container of {image!r} exited (status {code}) without serving /health"
    if not openenv_image:
        message += (
            f"; it is probably not an openenv image (no {LABEL_MANIFEST} label: its command is not "
            "`openenv serve`). Build an environment folder into one with `openenv build ENV_DIR`"
        )
    elif code == 0 and not tail:
        message += "; its command ended at once without error: does the image's command run `openenv serve`?"
    return f"{message}; {_log_tail_text(tail)}"


def _internal_network(engine: docker.DockerClient) -> str:
    """Create (once) the internal bridge network used for policy `none`; return its name."""
    import docker.errors

    if _is_docker_desktop(engine):
        raise ContainerRunError(
            "network policy 'none' needs the host to reach container IPs, which Docker Desktop does not allow; "
            "use network='bridge' (the container then has egress)"
        )
    if not engine.networks.list(names=[INTERNAL_NETWORK]):
        try:
            engine.networks.create(INTERNAL_NETWORK, driver="bridge", internal=True, labels={LABEL_MANAGED: "1"})
        except docker.errors.APIError as e:
            if e.status_code != 409:  # created meanwhile by another process
                raise ContainerRunError(f"could not create the network {INTERNAL_NETWORK!r}: {e}") from e
    return INTERNAL_NETWORK


def _is_docker_desktop(engine: docker.DockerClient) -> bool:
    """Whether the engine is Docker Desktop, whose container IPs the host cannot reach (asked once per client).

    Podman names itself in the headers of `/_ping` (about a millisecond), so only other engines
    are asked `/info`: Podman takes about a quarter of a second to answer that one.
    """
    known = _desktop_engines.get(engine)
    if known is None:
        ping = engine.api.get(f"{engine.api.base_url}/_ping", timeout=engine.api.timeout)
        podman = bool(ping.headers.get("Libpod-Api-Version"))
        known = not podman and "Docker Desktop" in str(engine.info().get("OperatingSystem", ""))
        _desktop_engines[engine] = known
    return known


_desktop_engines: weakref.WeakKeyDictionary[docker.DockerClient, bool] = weakref.WeakKeyDictionary()


def _sandbox_security_opts(engine: docker.DockerClient) -> list[str]:
    """`apparmor=unconfined` where the engine confines containers with AppArmor (its default
    profile denies the mounts bubblewrap makes); nothing otherwise."""
    return ["apparmor=unconfined"] if "name=apparmor" in _security_options(engine) else []


def _sandbox_uid_env(engine: docker.DockerClient) -> dict[str, str]:
    """Where container uids are host uids (no user namespace), a random range of session uids
    for this container, far from the default 62000.. that servers on the host lease: a session
    uid shared with the host or another container would share its RLIMIT_NPROC count, and a
    host-side server's `kill_uid` (which sees every container's processes) would kill it. Under
    a user namespace (rootless, userns-remap) the in-container default maps elsewhere already."""
    from openenv_sdk.sandbox._sandbox import UID_BASE_ENV, UID_COUNT_ENV  # not on echo's cold start

    options = _security_options(engine)
    if "name=userns" in options or "name=rootless" in options:
        return {}
    base = 1_000_000 + secrets.randbelow(1_000_000) * 2_000  # up to 2_001_000_000: fits a uid_t
    return {UID_BASE_ENV: str(base), UID_COUNT_ENV: "2000"}


def _security_options(engine: docker.DockerClient) -> set[str]:
    """The engine's `SecurityOptions` names (`name=apparmor`, `name=userns`, ...). Asked once per
    client, and only for sandboxed environments (`/info` takes Podman about 0.2 s)."""
    known = _engine_security.get(engine)
    if known is None:
        known = {str(option).split(",", 1)[0] for option in engine.info().get("SecurityOptions") or []}
        _engine_security[engine] = known
    return known


_engine_security: weakref.WeakKeyDictionary[docker.DockerClient, set[str]] = weakref.WeakKeyDictionary()


def _slug(image: str) -> str:
    base = image.rsplit("/", 1)[-1].split(":", 1)[0].split("@", 1)[0]
    return "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in base)[:40] or "env"


_live: weakref.WeakSet[DockerProvider] = weakref.WeakSet()


@atexit.register
def _stop_all() -> None:
    for provider in list(_live):
        with contextlib.suppress(Exception):
            provider.stop()
