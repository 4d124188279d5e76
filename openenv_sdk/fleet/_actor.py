"""The Ray actor that holds one environment server on the node Ray placed it on.

Kept free of `ray` imports: `_ray.py` wraps `ServerActor` with `ray.remote(...)` and its options.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from openenv_sdk.providers.docker import DockerProvider, NetworkPolicy
from openenv_sdk.providers.local import LocalProcessProvider

__all__ = ["ServerActor"]

# Runs beside the server, as a child of the actor: when the actor's process is gone (killed with
# its node, or by `ray.kill`), its parent changes, and it kills the server's process group, or
# removes its container. A process server runs in a session of its own (so `stop()` can end its
# group), and a container belongs to the engine: a dying Ray worker would leave either behind.
_REAPER = """
import os, signal, sys, time
parent, kind, target = int(sys.argv[1]), sys.argv[2], sys.argv[3]
while os.getppid() == parent:
    time.sleep(0.2)
if kind == "group":
    try:
        os.killpg(int(target), signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
else:
    from openenv_sdk.containers.engine import connect_engine
    try:
        connect_engine().api.remove_container(target, force=True, v=True)  # no inspect first: one call
    except Exception:
        pass
"""
# An engine that answers slowly once (a loaded node) must not cost a healthy container its life:
# a container is given up only after this many checks in a row find it not running.
_CONTAINER_MISSES = 3


class ServerActor:
    """Starts a server on this node (`openenv serve ENV_DIR`, or a container of `image`); the
    actor's process exits when the server dies.

    Exiting is how a dead server is replaced: Ray restarts the actor (its `max_restarts`), and the
    new actor starts a new server, with a new port and a new orchestrator token.
    """

    def __init__(
        self,
        env_dir: str,
        host: str | None,
        startup_timeout_s: float,
        watch_interval_s: float,
        image: str | None = None,
        network: NetworkPolicy | None = None,
    ) -> None:
        if host is None:
            import ray

            host = ray.util.get_node_ip_address()  # reachable from the other nodes
        self._provider: LocalProcessProvider | DockerProvider
        if image is None:
            local = LocalProcessProvider(Path(env_dir), host=host, startup_timeout_s=startup_timeout_s)
            self._provider, self._misses_allowed = local, 1
        else:
            # The node's own engine (DOCKER_HOST, else Podman's or Docker's socket). With policy
            # `bridge` the port is published on the node's address, so other nodes reach it.
            docker = DockerProvider(image, network=network, publish_host=host, startup_timeout_s=startup_timeout_s)
            self._provider, self._misses_allowed = docker, _CONTAINER_MISSES
        self._stopping = False
        self._provider.start()
        if isinstance(self._provider, LocalProcessProvider):
            assert self._provider.pid is not None  # started: start() raised otherwise
            target = ("group", str(self._provider.pid))
        else:
            assert self._provider.container_id is not None
            target = ("container", self._provider.container_id)
        self._reaper = subprocess.Popen(
            [sys.executable, "-c", _REAPER, str(os.getpid()), *target],
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        self._watch_interval_s = watch_interval_s
        threading.Thread(target=self._watch, name="openenv-fleet-watch", daemon=True).start()

    def endpoint(self) -> dict[str, Any]:
        """Where the server answers: `url`, `token`, `node_id`, `actor_pid`, and `server_pid` (a
        process) or `container_id` (a container)."""
        import ray

        provider = self._provider
        return {
            "url": provider.base_url,
            "token": provider.orchestrator_token,
            "node_id": ray.get_runtime_context().get_node_id(),
            "actor_pid": os.getpid(),
            "server_pid": provider.pid if isinstance(provider, LocalProcessProvider) else None,
            "container_id": provider.container_id if isinstance(provider, DockerProvider) else None,
        }

    def stop(self) -> None:
        """Stop the server and its reaper; the actor stays until `ray.kill`."""
        self._stopping = True
        self._provider.stop()
        with contextlib.suppress(ProcessLookupError):
            self._reaper.send_signal(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._reaper.wait(5)

    def _watch(self) -> None:
        misses = 0
        while not self._stopping:
            time.sleep(self._watch_interval_s)
            misses = 0 if self._stopping or self._provider.is_alive() else misses + 1
            if misses >= self._misses_allowed:
                os._exit(1)  # Ray sees the actor die and restarts it (a new server)
