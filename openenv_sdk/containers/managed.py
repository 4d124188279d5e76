"""The containers this SDK started, found by label, and their removal.

Every container a provider starts (`DockerProvider`, and so `openenv validate --image`, pools
and fleets) carries `org.openenv.managed=1` and `org.openenv.owner-pid` (the process that started
it). A provider removes its container on `stop()`, on leaving `with`, and at interpreter exit; a
process killed with SIGKILL (a Jupyter kernel restarted or killed, an OOM kill) leaves it running.
Such a container is *orphaned*: its owner process no longer runs on this machine.
`openenv containers list` shows them; `openenv containers clean` removes them.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from openenv_sdk.containers.labels import LABEL_IMAGE, LABEL_MANAGED, LABEL_NAME, LABEL_OWNER_PID

if TYPE_CHECKING:
    import docker

__all__ = ["ManagedContainer", "list_managed", "remove_managed"]


class ManagedContainer(BaseModel):
    """One container started by an openenv provider."""

    model_config = ConfigDict(frozen=True)

    id: str
    """The engine's container id (12 characters)."""
    name: str
    image: str
    """The image as its provider was asked for it (else the engine's name for it)."""
    environment: str | None
    """The environment's name (the image's `org.openenv.name` label), when it has one."""
    status: str
    """The engine's status: `running`, `exited`, `created`, ..."""
    owner_pid: int | None
    """The process that started it (its `org.openenv.owner-pid` label)."""
    orphaned: bool
    """Its owner process no longer runs on this machine (nothing will remove it but `clean`)."""


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: nothing is sent, only whether the pid exists is checked
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        return True
    return True


def _parse_labels(labels: Mapping[str, str] | None) -> dict[str, str]:
    return {LABEL_MANAGED: "1", **(labels or {})}


def list_managed(engine: docker.DockerClient, *, labels: Mapping[str, str] | None = None) -> list[ManagedContainer]:
    """Every container with `org.openenv.managed=1` (and each of `labels`), running or not, oldest first.

    Args:
        engine: a connected docker SDK client (`connect_engine()`).
        labels: more labels a container must carry (e.g. `{"org.openenv.owner-pid": "1234"}`).
    """
    filters = {"label": [f"{key}={value}" for key, value in _parse_labels(labels).items()]}
    found = []
    for container in engine.containers.list(all=True, filters=filters):
        tags = container.attrs.get("Config", {}).get("Labels") or {}
        owner = tags.get(LABEL_OWNER_PID, "")
        owner_pid = int(owner) if owner.isdigit() else None
        image_name = tags.get(LABEL_IMAGE) or container.attrs.get("Config", {}).get("Image") or container.attrs.get("Image", "")
        found.append(
            (
                container.attrs.get("Created", ""),
                ManagedContainer(
                    id=container.id[:12],
                    name=container.name,
                    image=str(image_name),
                    environment=tags.get(LABEL_NAME),
                    status=container.status,
                    owner_pid=owner_pid,
                    orphaned=owner_pid is None or not _process_alive(owner_pid),
                ),
            )
        )
    return [managed for _, managed in sorted(found, key=lambda pair: pair[0])]


def remove_managed(engine: docker.DockerClient, containers: list[ManagedContainer]) -> list[str]:
    """Remove (force: stop first) each container; return the ids removed (one already gone is skipped)."""
    import docker.errors

    removed = []
    for managed in containers:
        with contextlib.suppress(docker.errors.NotFound):
            engine.containers.get(managed.id).remove(force=True, v=True)
            removed.append(managed.id)
    return removed
