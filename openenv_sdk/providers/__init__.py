"""Providers start an environment server somewhere and give its URL.

    Provider               the contract (start/stop/is_alive, context manager)
    DockerProvider         a container in Docker Engine or Podman
    LocalProcessProvider   `openenv serve` in a local process
    HubSpaceProvider       a Hugging Face Space (`from_hub("org/space")`)
    ServerPool             several servers, clients spread over them
"""

from openenv_sdk.providers.base import Provider
from openenv_sdk.providers.docker import DockerProvider
from openenv_sdk.providers.hub import HubSpaceProvider, from_hub
from openenv_sdk.providers.local import LocalProcessProvider
from openenv_sdk.providers.pool import ServerPool

__all__ = ["DockerProvider", "HubSpaceProvider", "LocalProcessProvider", "Provider", "ServerPool", "from_hub"]
