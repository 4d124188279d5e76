"""RayFleet on a real multi-node Ray cluster made on this machine (`ray.cluster_utils.Cluster`).

Every node is a raylet of its own with one `env_slot`; each server asks for one, so Ray places one
server per node. The tests kill a node under open sessions and add a node back.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")
psutil = pytest.importorskip("psutil")

from ray.cluster_utils import Cluster  # noqa: E402

from openenv_sdk.errors import ClientStateError, ProviderError, TransportError  # noqa: E402
from openenv_sdk.fleet import RayFleet  # noqa: E402
from openenv_sdk.providers import Provider  # noqa: E402
from tests.fixtures.servers import wait_until  # noqa: E402

ECHO = Path(__file__).resolve().parents[2] / "environments" / "echo"
SLOT = {"env_slot": 1.0}
# Fast failure detection: a dead raylet is noticed in about 2 s instead of the default 30 s.
SYSTEM_CONFIG = {"health_check_period_ms": 500, "health_check_failure_threshold": 3, "health_check_timeout_ms": 500}


def _descendants() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


def _alive(pids: set[int]) -> set[int]:
    alive = set()
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.add(pid)
        except psutil.NoSuchProcess:
            pass
    return alive


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    before = _descendants()
    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "resources": SLOT, "include_dashboard": False, "_system_config": SYSTEM_CONFIG},
    )
    cluster.add_node(num_cpus=1, resources=SLOT)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)
    try:
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()
        assert wait_until(lambda: not _alive(_descendants() - before), timeout_s=20, interval_s=0.2), (
            f"left running after shutdown: {[psutil.Process(p).cmdline()[:3] for p in _alive(_descendants() - before)]}"
        )


def _fleet(size: int = 2) -> RayFleet:
    return RayFleet(
        ECHO, size=size, num_cpus=1, memory_bytes=64 * 2**20, resources=SLOT,
        startup_timeout_s=60, client_timeout_s=10, probe_interval_s=0.2, probe_timeout_s=1.0,
    )


def _node_of(fleet: RayFleet, url: str) -> str | None:
    return next(s.node_id for s in fleet.servers() if s.url == url)


def test_fleet_spreads_sessions_over_nodes_survives_a_lost_node_and_recovers(cluster: Cluster) -> None:
    head_id = cluster.head_node.node_id
    worker = cluster.list_all_nodes()[1]
    with _fleet() as fleet:
        assert {s.node_id for s in fleet.servers()} == {head_id, worker.node_id}
        clients = [fleet.client() for _ in range(4)]
        for i, env in enumerate(clients):
            env.reset()
            assert env.step({"message": f"hi {i}"}).observation["echoed_message"] == f"hi {i}"
        assert sorted(fleet.load().values()) == [2, 2]
        on_worker = [c for c in clients if _node_of(fleet, c.base_url) == worker.node_id]
        on_head = [c for c in clients if _node_of(fleet, c.base_url) == head_id]
        assert len(on_worker) == len(on_head) == 2

        member = next(m for m in fleet.members() if _node_of(fleet, m.base_url) == worker.node_id)
        old_url, old_token = member.start(), member.orchestrator_token
        assert isinstance(member, Provider) and member.is_alive()
        seen = _descendants() | {s.server_pid for s in fleet.servers() if s.server_pid is not None}
        lost_server = next(s.server_pid for s in fleet.servers() if s.node_id == worker.node_id)
        started = time.monotonic()
        cluster.remove_node(worker)
        # The node's processes die within moments; its server goes with them (its reaper).
        assert wait_until(lambda: not _alive({lost_server}), timeout_s=5, interval_s=0.05)
        for env in on_worker:
            with pytest.raises(TransportError):
                env.step({"message": "still there?"})
        assert time.monotonic() - started < 15  # a typed error, not a hang
        for env in on_head:
            assert env.step({"message": "fine"}).observation["echoed_message"] == "fine"

        assert wait_until(lambda: len(fleet.urls) == 1, timeout_s=15, interval_s=0.1)
        assert not member.is_alive()
        later = [fleet.client() for _ in range(3)]
        for env in later:
            assert _node_of(fleet, env.base_url) == head_id
            env.reset()
            env.step({"message": "on a survivor"})

        replacement = cluster.add_node(num_cpus=1, resources=SLOT)
        assert wait_until(lambda: len(fleet.urls) == 2, timeout_s=40, interval_s=0.2)
        assert {s.node_id for s in fleet.servers()} == {head_id, replacement.node_id}
        assert member.start() != old_url and member.orchestrator_token not in (None, old_token)
        restarted = fleet.client()  # the replaced server has no sessions: least loaded
        assert _node_of(fleet, restarted.base_url) == replacement.node_id
        restarted.reset()
        assert restarted.step({"message": "back"}).observation["echoed_message"] == "back"
        for env in [*clients, *later, restarted]:
            env.close()
        server_pids = {s.server_pid for s in fleet.servers() if s.server_pid is not None}
        seen |= server_pids | _descendants()
    assert len(server_pids) == 2
    assert not _alive(server_pids)
    with pytest.raises(ClientStateError):
        fleet.client()
    ray.shutdown()
    cluster.shutdown()
    # Orphans leave the process tree, so check every process seen during the run by id.
    assert wait_until(lambda: not _alive(seen), timeout_s=20, interval_s=0.2), [
        psutil.Process(p).cmdline()[:4] for p in _alive(seen)
    ]


def test_scale_adds_servers_and_stops_the_least_loaded_first(cluster: Cluster) -> None:
    with RayFleet(ECHO, size=1, num_cpus=0.25, memory_bytes=64 * 2**20, startup_timeout_s=60) as fleet:
        busy = fleet.client()
        busy.reset()
        fleet.scale(3)
        assert fleet.size == 3 and len(set(fleet.urls)) == 3
        assert sorted(fleet.load().values()) == [0, 0, 1]
        idle_pids = {s.server_pid for s in fleet.servers() if s.sessions == 0 and s.server_pid is not None}
        fleet.scale(1)
        assert fleet.urls == [busy.base_url]
        assert busy.step({"message": "kept"}).observation["echoed_message"] == "kept"
        assert wait_until(lambda: not _alive(idle_pids), timeout_s=10)
        busy.close()
        assert fleet.load() == {busy.base_url: 0}

        async def one_async_episode() -> str:
            async with fleet.async_client() as env:
                await env.reset()
                return (await env.step({"message": "async"})).observation["echoed_message"]

        assert asyncio.run(one_async_episode()) == "async"
        assert fleet.load() == {busy.base_url: 0}


def test_a_server_no_node_can_hold_fails_start_with_the_resources_it_asked_for(cluster: Cluster) -> None:
    fleet = RayFleet(ECHO, size=1, num_cpus=0.25, memory_bytes=64 * 2**20, resources={"gpu_box": 1}, startup_timeout_s=2)
    with pytest.raises(ProviderError, match=r"resources=\{'gpu_box': 1\}: check `ray status`"):
        fleet.start()
    with pytest.raises(ClientStateError):
        fleet.client()
