"""Connecting to a container engine through the `docker` Python SDK.

Docker Engine and Podman's Docker-compatible API are both engines here. The address is, in
order: the `docker_host` argument, `DOCKER_HOST`, Podman's root socket
(`/run/podman/podman.sock`) when it exists, then the docker SDK's default
(`/var/run/docker.sock`).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from openenv_sdk.containers.errors import SETUP_HINT, EngineUnavailableError

if TYPE_CHECKING:
    import docker

__all__ = ["DEFAULT_ENGINE_TIMEOUT_S", "PODMAN_SOCKET", "connect_engine", "resolve_docker_host"]

PODMAN_SOCKET = Path("/run/podman/podman.sock")
DEFAULT_ENGINE_TIMEOUT_S = 60.0
_PING_API_VERSION = "1.24"  # any: `/_ping` is asked without a version in its path


def resolve_docker_host(environ: Mapping[str, str] | None = None) -> str | None:
    """The engine address to use: `DOCKER_HOST`, else Podman's socket if present, else `None`.

    `None` means the docker SDK's own default (`unix:///var/run/docker.sock`).
    """
    env = os.environ if environ is None else environ
    host = env.get("DOCKER_HOST", "").strip()
    if host:
        return host
    if PODMAN_SOCKET.exists():
        return f"unix://{PODMAN_SOCKET}"
    return None


def connect_engine(
    *, docker_host: str | None = None, timeout_s: float = DEFAULT_ENGINE_TIMEOUT_S
) -> docker.DockerClient:
    """Connect to the container engine and check that it answers.

    Args:
        docker_host: engine address such as `unix:///run/podman/podman.sock` or
            `tcp://host:2375`; `None` resolves it with `resolve_docker_host`.
        timeout_s: timeout of each request to the engine, in seconds.

    Raises:
        EngineUnavailableError: the `docker` package is missing, or the engine does not answer;
            the message says how to get one.
    """
    try:
        import docker
        import docker.errors
    except ImportError:
        raise EngineUnavailableError(
            "the `docker` Python package is needed for containers: pip install 'openenv-sdk[docker]'",
            docker_host=docker_host,
        ) from None
    host = docker_host or resolve_docker_host()

    def make(version: str) -> docker.DockerClient:
        if docker_host is None and os.environ.get("DOCKER_HOST", "").strip():
            return docker.from_env(version=version, timeout=_int_timeout(timeout_s))  # honours DOCKER_TLS_VERIFY too
        if host is not None:
            return docker.DockerClient(base_url=host, version=version, timeout=_int_timeout(timeout_s))
        return docker.from_env(version=version, timeout=_int_timeout(timeout_s))

    client = None
    try:
        _probe_unix_socket(host or "unix:///var/run/docker.sock", timeout_s)
        # The API version comes from the ping's `Api-Version` header: the SDK's own negotiation
        # (`version="auto"`) asks `/version`, which Podman takes about 0.4 s to answer.
        client = make(_PING_API_VERSION)
        ping = client.api.get(f"{client.api.base_url}/_ping", timeout=timeout_s)
        ping.raise_for_status()
        api_version = ping.headers.get("Api-Version")
        client.close()
        client = make(api_version or "auto")
    except Exception as e:  # the SDK raises DockerException, requests' errors, or OSError
        if client is not None:
            client.close()
        where = host or "the docker default (unix:///var/run/docker.sock)"
        raise EngineUnavailableError(
            f"no container engine answers at {where}: {_one_line(e)}. {SETUP_HINT}", docker_host=host
        ) from e
    return client


def _probe_unix_socket(host: str, timeout_s: float) -> None:
    # The docker SDK leaks its socket when a unix-socket connection fails; probe first.
    if not host.startswith(("unix://", "http+unix://")):
        return
    path = host.split("://", 1)[1]
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(min(timeout_s, 5.0))
        probe.connect(path)


def _int_timeout(timeout_s: float) -> int:
    if timeout_s <= 0:
        raise ValueError(f"timeout_s must be positive, got {timeout_s}")
    return max(1, round(timeout_s))


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text[:300]}" if text else type(error).__name__
