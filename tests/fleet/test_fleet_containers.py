"""RayFleet with containers as servers (`image=`), on a 2-raylet local Ray cluster and the real
container engine: each actor runs its server as a container through `DockerProvider`, with its
own token; a lost node's container is removed by its reaper and replaced on a new node.

Runs with OPENENV_TEST_CONTAINERS=1 (scripts/test.sh sets it where an engine answers).
"""

from __future__ import annotations

import time
from urllib.parse import urlsplit

import pytest

ray = pytest.importorskip("ray")

from ray.cluster_utils import Cluster  # noqa: E402

from openenv_sdk.client import GenericEnvClient  # noqa: E402
from openenv_sdk.errors import ProviderError, TransportError  # noqa: E402
from openenv_sdk.fleet import RayFleet  # noqa: E402
from tests.containers.conftest import echo_image, engine, requires_engine  # noqa: E402, F401
from tests.fixtures.servers import wait_until  # noqa: E402
from tests.fleet.test_ray_fleet import ECHO, SLOT, cluster  # noqa: E402, F401

pytestmark = requires_engine


def _fleet(image: str, **options: object) -> RayFleet:
    return RayFleet(
        ECHO, image=image, size=2, num_cpus=1, memory_bytes=64 * 2**20, resources=SLOT,
        startup_timeout_s=120, client_timeout_s=10, probe_interval_s=0.2, probe_timeout_s=1.0, **options,  # type: ignore[arg-type]
    )  # fmt: skip


def _exists(engine: object, container_id: str) -> bool:
    # A sparse list, not `get` (an inspect): Podman answers an inspect of a container being removed with a 500.
    return bool(engine.containers.list(all=True, sparse=True, filters={"id": container_id}))  # type: ignore[attr-defined]


def test_container_servers_spread_over_nodes_and_a_lost_nodes_container_is_replaced(
    cluster: Cluster, engine: object, echo_image: str
) -> None:
    head_id = cluster.head_node.node_id
    worker = cluster.list_all_nodes()[1]
    seen: set[str] = set()
    with _fleet(echo_image) as fleet:
        servers = fleet.servers()
        assert {s.node_id for s in servers} == {head_id, worker.node_id}
        assert all(s.container_id and s.server_pid is None for s in servers)
        seen |= {s.container_id for s in servers if s.container_id}
        for s in servers:
            assert engine.containers.get(s.container_id).status == "running"  # type: ignore[attr-defined]
            with pytest.raises(TransportError, match="HTTP 401"), GenericEnvClient(s.url) as stranger:
                stranger.reset()  # each container holds its own orchestrator token
        clients = [fleet.client() for _ in range(2)]  # one per server: the least loaded first
        for i, env in enumerate(clients):
            env.reset()
            assert env.step({"message": f"hi {i}"}).observation["echoed_message"] == f"hi {i}"
        lost = next(s for s in servers if s.node_id == worker.node_id)
        on_lost = next(c for c in clients if c.base_url == lost.url)
        on_head = next(c for c in clients if c.base_url != lost.url)

        cluster.remove_node(worker)
        # The actor died with its node; its reaper removes the container from the engine.
        assert wait_until(lambda: not _exists(engine, lost.container_id), timeout_s=30, interval_s=0.2)
        started = time.monotonic()
        with pytest.raises(TransportError):  # refused, reset, or RequestTimeout: typed, never a hang
            on_lost.step({"message": "still there?"})
        assert time.monotonic() - started < 30
        assert on_head.step({"message": "fine"}).observation["echoed_message"] == "fine"
        assert wait_until(lambda: len(fleet.urls) == 1, timeout_s=20, interval_s=0.1)
        with fleet.client() as later:
            assert later.base_url == on_head.base_url
            later.reset()

        replacement = cluster.add_node(num_cpus=1, resources=SLOT)
        assert wait_until(lambda: len(fleet.urls) == 2, timeout_s=90, interval_s=0.2)
        back = next(s for s in fleet.servers() if s.index == lost.index)
        assert back.node_id == replacement.node_id and back.container_id not in (None, lost.container_id)
        assert back.generation > lost.generation
        seen |= {s.container_id for s in fleet.servers() if s.container_id}
        with fleet.client() as restarted:  # the replaced server has no sessions: least loaded
            assert restarted.base_url == back.url
            restarted.reset()
            assert restarted.step({"message": "back"}).observation["echoed_message"] == "back"
        for env in clients:
            env.close()
    assert len(seen) == 3
    assert wait_until(lambda: not any(_exists(engine, c) for c in seen), timeout_s=30, interval_s=0.2)


def test_bridge_containers_are_published_on_the_nodes_address_and_a_dead_one_is_replaced(
    cluster: Cluster, engine: object, echo_image: str
) -> None:
    node_ip = ray.util.get_node_ip_address()
    with _fleet(echo_image, container_network="bridge") as fleet:
        assert {urlsplit(url).hostname for url in fleet.urls} == {node_ip}
        with fleet.client() as env:
            env.reset()
            assert env.step({"message": "published"}).observation["echoed_message"] == "published"
        # The server's container dies (its node lives): the actor sees it gone and exits, Ray
        # restarts the actor, which starts a new container; the dead one is removed.
        dead = fleet.servers()[0]
        engine.containers.get(dead.container_id).kill()  # type: ignore[attr-defined]
        assert wait_until(
            lambda: fleet.servers()[0].generation > dead.generation and fleet.servers()[0].url is not None,
            timeout_s=60, interval_s=0.2,
        )  # fmt: skip
        back = fleet.servers()[0]
        assert back.container_id != dead.container_id and back.node_id == dead.node_id
        assert wait_until(lambda: not _exists(engine, dead.container_id), timeout_s=30, interval_s=0.2)
        with fleet.client() as env:  # least loaded: either server; both answer
            env.reset()
            assert env.step({"message": "again"}).observation["echoed_message"] == "again"
        with GenericEnvClient(back.url, orchestrator_token=back.orchestrator_token) as env:
            env.reset()


def test_an_image_the_node_lacks_fails_start_with_its_name(cluster: Cluster) -> None:
    fleet = RayFleet(ECHO, image="localhost/openenv-no-such-image:0", size=1, num_cpus=1, memory_bytes=64 * 2**20, startup_timeout_s=60)
    with pytest.raises(ProviderError, match=r"openenv-no-such-image:0.*not found in the engine"):
        fleet.start()
