"""Providers start an environment server somewhere and give its URL.

    Provider               the contract (start/stop/is_alive, context manager)
    DockerProvider         a container in Docker Engine or Podman
    LocalProcessProvider   `openenv serve` in a local process
"""

from openenv_sdk.providers.base import Provider
from openenv_sdk.providers.docker import DockerProvider
from openenv_sdk.providers.local import LocalProcessProvider

__all__ = ["DockerProvider", "LocalProcessProvider", "Provider"]
