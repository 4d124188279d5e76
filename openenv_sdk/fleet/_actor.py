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

from openenv_sdk.providers.local import LocalProcessProvider

__all__ = ["ServerActor"]

# Runs beside the server, as a child of the actor: when the actor's process is gone (killed with
# its node, or by `ray.kill`), its parent changes, and it kills the server's process group. The
# server runs in a session of its own (so `stop()` can end its group), which a dying Ray worker
# would otherwise leave behind.
_REAPER = """
import os, signal, sys, time
parent, group = int(sys.argv[1]), int(sys.argv[2])
while os.getppid() == parent:
    time.sleep(0.2)
try:
    os.killpg(group, signal.SIGKILL)
except (ProcessLookupError, PermissionError):
    pass
"""


class ServerActor:
    """Starts `openenv serve ENV_DIR` on this node; the process exits when the server dies.

    Exiting is how a dead server is replaced: Ray restarts the actor (its `max_restarts`), and the
    new actor starts a new server, with a new port and a new orchestrator token.
    """

    def __init__(self, env_dir: str, host: str | None, startup_timeout_s: float, watch_interval_s: float) -> None:
        if host is None:
            import ray

            host = ray.util.get_node_ip_address()  # reachable from the other nodes
        self._provider = LocalProcessProvider(Path(env_dir), host=host, startup_timeout_s=startup_timeout_s)
        self._stopping = False
        self._provider.start()
        assert self._provider.pid is not None  # started: start() raised otherwise
        self._reaper = subprocess.Popen(
            [sys.executable, "-c", _REAPER, str(os.getpid()), str(self._provider.pid)],
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        self._watch_interval_s = watch_interval_s
        threading.Thread(target=self._watch, name="openenv-fleet-watch", daemon=True).start()

    def endpoint(self) -> dict[str, Any]:
        """Where the server answers: `url`, `token`, `node_id`, `actor_pid`, `server_pid`."""
        import ray

        return {
            "url": self._provider.base_url,
            "token": self._provider.orchestrator_token,
            "node_id": ray.get_runtime_context().get_node_id(),
            "actor_pid": os.getpid(),
            "server_pid": self._provider.pid,
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
        while not self._stopping:
            time.sleep(self._watch_interval_s)
            if not self._stopping and not self._provider.is_alive():
                os._exit(1)  # Ray sees the actor die and restarts it (a new server)
