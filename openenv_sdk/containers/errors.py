"""Errors of the container machinery (engine, build, run).

    ContainerError (openenv_sdk.errors)
    ├── EngineUnavailableError   no container engine answers (or the `docker` package is missing)
    ├── BuildError               an image build failed; carries the tail of the build log
    └── ContainerRunError        a container could not be started or kept running
        ├── ContainerExitedError the container exited before or while serving; carries its log tail
        └── StartupTimeoutError  `/health` did not answer 200 within `startup_timeout_s`
"""

from __future__ import annotations

from openenv_sdk.errors import ContainerError

__all__ = [
    "BuildError",
    "ContainerError",
    "ContainerExitedError",
    "ContainerRunError",
    "EngineUnavailableError",
    "StartupTimeoutError",
]

SETUP_HINT = (
    "Start Docker Engine, or on Debian/Ubuntu run `sudo scripts/setup_container_engine.sh` from the "
    "openenv-sdk repository (Podman with a Docker-compatible API), then "
    "`export DOCKER_HOST=unix:///run/podman/podman.sock`."
)


class EngineUnavailableError(ContainerError):
    """No container engine could be reached, or the `docker` Python package is missing.

    Attributes:
        docker_host: the engine address that was tried (`None`: the docker SDK's default).
    """

    def __init__(self, message: str, *, docker_host: str | None) -> None:
        super().__init__(message)
        self.docker_host = docker_host


class BuildError(ContainerError):
    """An image build failed.

    Attributes:
        tag: the tag that was being built.
        log_tail: the last lines of the build log.
    """

    def __init__(self, message: str, *, tag: str, log_tail: list[str]) -> None:
        super().__init__(message)
        self.tag = tag
        self.log_tail = log_tail


class ContainerRunError(ContainerError):
    """A container could not be started or kept serving.

    Attributes:
        container_id: the container's id, when one was created.
        log_tail: the last lines of the container's log (empty when unknown).
    """

    def __init__(self, message: str, *, container_id: str | None = None, log_tail: list[str] | None = None) -> None:
        super().__init__(message)
        self.container_id = container_id
        self.log_tail = log_tail or []


class ContainerExitedError(ContainerRunError):
    """The container exited while it was expected to serve.

    Attributes:
        exit_code: the container's exit status (`None` when unknown).
    """

    def __init__(
        self,
        message: str,
        *,
        container_id: str | None = None,
        log_tail: list[str] | None = None,
        exit_code: int | None = None,
    ) -> None:
        super().__init__(message, container_id=container_id, log_tail=log_tail)
        self.exit_code = exit_code


class StartupTimeoutError(ContainerRunError):
    """The server in the container did not answer `GET /health` with 200 in time."""
