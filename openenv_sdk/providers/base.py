"""The provider contract: something that starts an environment server and gives its URL.

A provider is a context manager: `with DockerProvider(image) as provider: provider.base_url`.
"""

from __future__ import annotations

from types import TracebackType
from typing import Protocol, Self, runtime_checkable

__all__ = ["OrchestratorTokenHolder", "Provider"]


@runtime_checkable
class Provider(Protocol):
    """Starts and stops one environment server.

    Subclass it to get the context manager (`__enter__` starts, `__exit__` stops) and the
    defaults of the optional members (`logs_tail`, `host_address`); a new provider overrides
    what it can tell, and every caller reads these members directly.
    """

    def start(self) -> str:
        """Start the server, wait until it is healthy, and return its base URL (`http://host:port`).

        Calling it again while started returns the same URL.

        Raises:
            ProviderError: the server could not be started or did not become healthy.
        """
        ...

    def stop(self) -> None:
        """Stop the server and release what it holds. Safe to call twice, or before `start`."""
        ...

    def is_alive(self) -> bool:
        """Whether the server's process is still running (not whether it answers)."""
        ...

    def logs_tail(self, lines: int = 40) -> list[str]:
        """The server's last `lines` lines of output, newest last, for error messages (a client
        quotes them when the server dies under it). The default, for a provider that cannot read
        its server's output (a remote Space), is no lines."""
        return []

    @property
    def host_address(self) -> str | None:
        """The address at which the server's processes reach this host (a trainer's interception
        server listens there): loopback for a local process, the container network's gateway
        for a container. The default, for a provider that does not know, is `None`."""
        return None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


@runtime_checkable
class OrchestratorTokenHolder(Protocol):
    """A provider that starts its server with an orchestrator token; clients built on it send it.

    `LocalProcessProvider` and `DockerProvider` make a new token for every server they start and
    pass it through the server's `OPENENV_ORCHESTRATOR_TOKEN`; the server then refuses
    reset/step/state/close and orchestrator calls without `Authorization: Bearer <token>`.
    """

    @property
    def orchestrator_token(self) -> str | None:
        """The running server's token (`None` before `start()`); never logged, never in `repr`."""
        ...
