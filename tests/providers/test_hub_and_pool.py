"""The Space provider and the server pool, against real servers on loopback."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from openenv_sdk import ClientStateError, ProviderError
from openenv_sdk.client import GenericEnvClient
from openenv_sdk.providers import HubSpaceProvider, LocalProcessProvider, ServerPool, from_hub
from openenv_sdk.providers.hub import space_url

ECHO_DIR = Path(__file__).resolve().parents[2] / "environments" / "echo"


@pytest.mark.parametrize(
    ("repo_id", "url"),
    [
        ("openenv/echo", "https://openenv-echo.hf.space"),
        ("My-Org/Wordle_Env.v2", "https://my-org-wordle-env-v2.hf.space"),
    ],
)
def test_space_urls_follow_the_hub_naming(repo_id: str, url: str) -> None:
    assert space_url(repo_id) == url
    assert from_hub(repo_id).url == url


def test_a_bad_space_id_is_refused() -> None:
    with pytest.raises(ValueError, match="expected a Space id like 'org/name', got 'no-slash'"):
        space_url("no-slash")


def test_a_space_provider_drives_an_episode(echo_server: str) -> None:
    # A real server stands in for the Space (the Hub is not reachable from here).
    provider = HubSpaceProvider("openenv/echo", url=echo_server, startup_timeout_s=10)
    with GenericEnvClient(provider=provider) as env:
        env.reset()
        assert env.step({"message": "hi"}).observation["echoed_message"] == "hi"
        assert provider.is_alive()
    assert httpx.get(f"{echo_server}/health").status_code == 200  # the Space is not ours to stop


def test_an_unreachable_space_is_a_clear_error(free_port: int) -> None:
    provider = HubSpaceProvider("openenv/gone", url=f"http://127.0.0.1:{free_port}", startup_timeout_s=0.3)
    with pytest.raises(ProviderError, match=r"Space openenv/gone at http://127.0.0.1:\d+ did not answer GET /health"):
        provider.start()


def test_a_pool_spreads_clients_over_its_servers_and_stops_them() -> None:
    with ServerPool(lambda: LocalProcessProvider(ECHO_DIR), size=2) as pool:
        urls = pool.urls
        assert len(set(urls)) == 2
        clients = [pool.client() for _ in range(4)]
        assert sorted(pool.load().values()) == [2, 2]
        for i, client in enumerate(clients):
            client.reset()
            assert client.step({"message": f"m{i}"}).observation["echoed_message"] == f"m{i}"
        clients[0].close()
        assert sorted(pool.load().values()) == [1, 2]
        replacement = pool.client()  # goes to the server with the free slot
        assert sorted(pool.load().values()) == [2, 2]
        for client in [*clients[1:], replacement]:
            client.close()
    for url in urls:
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"{url}/health", timeout=2)
    with pytest.raises(ClientStateError, match="the pool is not started, or closed"):
        pool.client()
