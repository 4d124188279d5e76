"""What an environment's pod may do: its security contexts, writable folders and linter waivers.

Every pod: no service account token, the runtime's default seccomp profile, every capability
dropped, no privilege escalation (`no_new_privs`), a read-only root file system with `emptyDir`s
where the server writes (`/tmp`; `/run` for a sandbox's uid leases).

An environment without a sandbox runs as its image's non-root user (uid 10001, `openenv build`'s):
the pod meets the Pod Security Standards' `restricted` profile.

A sandboxed environment (manifest `sandbox:`) runs bubblewrap as root, without a user namespace,
exactly as `DockerProvider` runs it (docs/containers.md): root, the capabilities in
`SANDBOX_CAPABILITIES` added back (SYS_ADMIN for the namespaces and mounts, NET_ADMIN, SETUID,
SETGID, SETPCAP, CHOWN, KILL, DAC_OVERRIDE, FOWNER), AppArmor `Unconfined` (the runtimes' default
profiles deny `mount`; a `Localhost` profile of yours may replace it). The runtime's default
seccomp profile stays: it allows `mount`, `unshare`, `setns` and namespace flags of `clone` to a
container that holds SYS_ADMIN. The pod then needs the `privileged` Pod Security level.

`user_namespace=True` runs the pod in a user namespace of its own (`hostUsers: false`): its
root and its capabilities then hold in that namespace only, and its session uids are its own on
the node. Bubblewrap's fresh `/proc` needs `procMount: Unmasked` there (the kernel refuses a new
proc mount in a user namespace while parts of `/proc` are masked). It needs a cluster with user
namespaces (Kubernetes 1.33 on, or 1.30 with the feature gates) and was not run here.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from openenv_sdk.containers.dockerfile import DockerfileSpec
from openenv_sdk.manifest import Manifest
from openenv_sdk.providers.docker import SANDBOX_CAPABILITIES
from openenv_sdk.sandbox._sandbox import UID_BASE_ENV, UID_COUNT_ENV

__all__ = ["APPARMOR_PROFILES", "CHECKOV_WAIVERS", "PodSecurity", "apparmor_profile", "checkov_annotations", "pod_security"]

IMAGE_UID = DockerfileSpec.model_fields["uid"].default
"""The non-root user `openenv build` images run as (uid and gid)."""

APPARMOR_PROFILES = ("unconfined", "runtime/default", "localhost/<profile>")
"""The `apparmor` values, in the annotation's spelling: `localhost/NAME` is a profile loaded on every node."""

CHECKOV_WAIVERS = {
    "CKV_K8S_23": "root: bubblewrap sets up each command's namespaces as root (no user namespace); commands drop to the session's uid",
    "CKV_K8S_40": "root: bubblewrap runs as uid 0; agent commands run as high session uids (OPENENV_SANDBOX_UID_BASE)",
    "CKV_K8S_25": "SANDBOX_CAPABILITIES are added back (after drop ALL); setpriv clears them all before an agent command runs",
    "CKV_K8S_39": "SYS_ADMIN: bubblewrap's pid, mount, IPC, UTS and network namespaces, its mounts and pivot_root",
}
"""checkov's findings that bubblewrap makes inherent, each with why: waived on a sandboxed
environment's Deployment only (`checkov.io/skipN` annotations)."""

_SESSION_UID_COUNT = 2000


@dataclass(frozen=True)
class PodSecurity:
    """What `pod_security` adds to the Deployment's pod template."""

    pod: dict[str, Any]
    """Fields of the pod spec (`automountServiceAccountToken`, `securityContext`, ...)."""
    container: dict[str, Any]
    """The server container's `securityContext`."""
    volumes: list[dict[str, Any]]
    volume_mounts: list[dict[str, Any]]
    env: list[dict[str, Any]]
    """Variables for the server (a sandbox's session uid range)."""


def apparmor_profile(value: str) -> dict[str, str]:
    """The `appArmorProfile` of a container, from `unconfined`, `runtime/default` or `localhost/NAME`.

    Raises:
        ValueError: any other value (the message lists the accepted ones).
    """
    if value == "unconfined":
        return {"type": "Unconfined"}
    if value == "runtime/default":
        return {"type": "RuntimeDefault"}
    name = value.removeprefix("localhost/")
    if value.startswith("localhost/") and name and "/" not in name:
        return {"type": "Localhost", "localhostProfile": name}
    raise ValueError(f"apparmor must be one of {', '.join(APPARMOR_PROFILES)}, got {value!r}")


def pod_security(manifest: Manifest, *, apparmor: str | None = None, user_namespace: bool = False) -> PodSecurity:
    """The pod's and the server container's security settings, and the folders it may write.

    `apparmor`: the container's AppArmor profile; default `unconfined` for a sandboxed
    environment, `runtime/default` otherwise.

    Raises:
        ValueError: a bad `apparmor` value, or `user_namespace` for an environment without a sandbox.
    """
    sandboxed = manifest.sandbox is not None
    if user_namespace and not sandboxed:
        raise ValueError("user_namespace is for sandboxed environments (manifest `sandbox:`); this one runs as a non-root user already")
    profile = apparmor_profile(apparmor or ("unconfined" if sandboxed else "runtime/default"))
    pod: dict[str, Any] = {
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,  # no other Service's address in the server's environment
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
    }
    container: dict[str, Any] = {
        "allowPrivilegeEscalation": False,  # no_new_privs, as DockerProvider's no-new-privileges
        "privileged": False,
        "readOnlyRootFilesystem": True,
        "appArmorProfile": profile,
        # The Kubernetes spelling without `CAP_`: the API server refuses `CAP_SYS_ADMIN` beside
        # allowPrivilegeEscalation false, and the runtime adds the prefix itself.
        "capabilities": {"drop": ["ALL"], **({"add": list(SANDBOX_CAPABILITIES)} if sandboxed else {})},
    }
    # /tmp: the sessions' folders (bounded tmpfs mounts inside it, memory, where the sandbox can make them).
    volumes: list[dict[str, Any]] = [{"name": "tmp", "emptyDir": {"sizeLimit": _quantity(manifest.resources.memory_bytes)}}]
    mounts: list[dict[str, Any]] = [{"name": "tmp", "mountPath": "/tmp"}]
    env: list[dict[str, Any]] = []
    if sandboxed:
        container |= {"runAsUser": 0, "runAsGroup": 0, "runAsNonRoot": False}
        # /run: the uid leases (/run/openenv-sandbox), small and in memory
        volumes.append({"name": "run", "emptyDir": {"medium": "Memory", "sizeLimit": "16Mi"}})
        mounts.append({"name": "run", "mountPath": "/run"})
        if user_namespace:
            pod["hostUsers"] = False
            container["procMount"] = "Unmasked"
        else:
            # Host uids: a range of session uids for this Deployment, far from other servers'
            # (as DockerProvider gives each container); replicas on one node share it.
            base = 1_000_000 + secrets.randbelow(1_000_000) * _SESSION_UID_COUNT
            env = [{"name": UID_BASE_ENV, "value": str(base)}, {"name": UID_COUNT_ENV, "value": str(_SESSION_UID_COUNT)}]
    else:
        pod["securityContext"] |= {"runAsNonRoot": True, "runAsUser": IMAGE_UID, "runAsGroup": IMAGE_UID, "fsGroup": IMAGE_UID}
    return PodSecurity(pod=pod, container=container, volumes=volumes, volume_mounts=mounts, env=env)


def checkov_annotations(manifest: Manifest) -> dict[str, str]:
    """checkov's waivers for the Deployment of `manifest`'s environment: none without a sandbox."""
    if manifest.sandbox is None:
        return {}
    return {f"checkov.io/skip{i}": f"{check}={reason}" for i, (check, reason) in enumerate(CHECKOV_WAIVERS.items(), start=1)}


def _quantity(size_bytes: int) -> str:
    return f"{size_bytes // 2**20}Mi" if size_bytes % 2**20 == 0 else str(size_bytes)
