"""Spread sessions over several servers (containers): one pool, many clients."""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any, Self

from openenv_sdk.errors import ClientStateError, ProviderError
from openenv_sdk.providers.base import OrchestratorTokenHolder, Provider

__all__ = ["ServerPool"]


class ServerPool:
    """Starts `size` servers from `provider_factory` and hands out clients on the least-loaded one.

    Each server still holds many sessions; the pool adds more servers (containers) when one
    process or one container's limits are not enough:

        with ServerPool(lambda: DockerProvider("openenv-coding"), size=3) as pool:
            clients = [pool.client() for _ in range(48)]   # 16 sessions on each container

    Args:
        provider_factory: makes one provider (e.g. `DockerProvider(image)`); called `size` times.
        size: how many servers to start.
        client_factory: makes a client for a base URL (and `orchestrator_token=`, when the provider
            started its server with one); defaults to `GenericEnvClient`. Closing the client
            frees its slot through the client's `add_close_hook`.
    """

    def __init__(
        self,
        provider_factory: Callable[[], Provider],
        *,
        size: int,
        client_factory: Callable[..., Any] | None = None,
    ) -> None:
        if size < 1:
            raise ValueError("a pool needs at least one server")
        self._provider_factory = provider_factory
        self._size = size
        self._client_factory = client_factory
        self._providers: list[Provider] = []
        self._urls: list[str] = []
        self._load: dict[str, int] = {}
        self._lock = threading.Lock()
        self._closed = False

    def start(self) -> Self:
        try:
            for _ in range(self._size):
                provider = self._provider_factory()
                self._providers.append(provider)
                url = provider.start()
                self._urls.append(url)
                self._load[url] = 0
        except Exception:
            self.close()
            raise
        return self

    @property
    def urls(self) -> list[str]:
        """The servers' base URLs."""
        return list(self._urls)

    def load(self) -> dict[str, int]:
        """Clients handed out and not yet closed, per server."""
        with self._lock:
            return dict(self._load)

    def client(self) -> Any:
        """A new client on the server with the fewest open clients (closing it frees its slot)."""
        if self._closed or not self._urls:
            raise ClientStateError("the pool is not started, or closed")
        with self._lock:
            alive = [u for u, p in zip(self._urls, self._providers, strict=True) if p.is_alive()]
            if not alive:
                raise ProviderError("every server of the pool is down")
            url = min(alive, key=lambda u: self._load[u])
            self._load[url] += 1
        provider = self._providers[self._urls.index(url)]
        token = provider.orchestrator_token if isinstance(provider, OrchestratorTokenHolder) else None
        client = self._make_client(url, token)

        def release() -> None:
            with self._lock:
                if url in self._load and self._load[url] > 0:
                    self._load[url] -= 1

        client.add_close_hook(release)
        return client

    def _make_client(self, url: str, token: str | None) -> Any:
        if self._client_factory is not None:
            return self._client_factory(url) if token is None else self._client_factory(url, orchestrator_token=token)
        from openenv_sdk.client import GenericEnvClient

        return GenericEnvClient(url, orchestrator_token=token)

    def close(self) -> None:
        """Stop every server."""
        self._closed = True
        for provider in self._providers:
            try:
                provider.stop()
            except Exception:  # stop the others all the same
                pass
        self._providers.clear()
        self._urls.clear()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
