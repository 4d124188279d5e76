"""A Hugging Face Space that runs an environment server (`openenv push` makes one)."""

from __future__ import annotations

import re

from openenv_sdk.errors import ProviderError
from openenv_sdk.providers.base import Provider
from openenv_sdk.providers.health import wait_for_health

__all__ = ["HubSpaceProvider", "from_hub", "space_url"]

DEFAULT_STARTUP_TIMEOUT_S = 300.0  # a sleeping Space takes minutes to wake


def space_url(repo_id: str) -> str:
    """The URL a Docker Space `owner/name` is served at: `https://owner-name.hf.space`.

    Raises:
        ValueError: `repo_id` is not `owner/name`.
    """
    if not re.fullmatch(r"[\w.-]+/[\w.-]+", repo_id):
        raise ValueError(f"expected a Space id like 'org/name', got {repo_id!r}")
    subdomain = re.sub(r"[^a-z0-9-]", "-", repo_id.replace("/", "-").lower()).strip("-")
    return f"https://{subdomain}.hf.space"


class HubSpaceProvider(Provider):
    """Connects to a running Space. It does not own the Space: `stop()` leaves it running.

    Args:
        repo_id: the Space, `owner/name`.
        url: where it is served, when not at the usual `*.hf.space` address (a private
            endpoint, or a local stand-in in tests).
        startup_timeout_s: how long to wait for `/health` (a sleeping Space wakes slowly).
    """

    def __init__(
        self, repo_id: str, *, url: str | None = None, startup_timeout_s: float = DEFAULT_STARTUP_TIMEOUT_S
    ) -> None:
        self.repo_id = repo_id
        self.url = (url or space_url(repo_id)).rstrip("/")
        self.startup_timeout_s = startup_timeout_s
        self._started = False

    def start(self) -> str:
        outcome = wait_for_health(self.url, timeout_s=self.startup_timeout_s, request_timeout_s=10.0)
        if outcome != "healthy":
            raise ProviderError(
                f"Space {self.repo_id} at {self.url} did not answer GET /health with 200 within "
                f"{self.startup_timeout_s:g} s: is it built and running (and public, or is your token set)?"
            )
        self._started = True
        return self.url

    def stop(self) -> None:
        self._started = False

    def is_alive(self) -> bool:
        return self._started and wait_for_health(self.url, timeout_s=0.0, request_timeout_s=5.0) == "healthy"


def from_hub(repo_id: str, **kwargs: object) -> HubSpaceProvider:
    """A provider for the Space `repo_id`; pass it to a client: `GenericEnvClient(provider=from_hub("org/env"))`."""
    return HubSpaceProvider(repo_id, **kwargs)  # type: ignore[arg-type]
