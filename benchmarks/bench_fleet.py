"""Episodes/s and p99 step latency through `RayFleet.client()` against direct clients of the same servers.

Starts a Ray cluster on this machine (`ray.cluster_utils.Cluster`, one raylet per node, each with
one `env_slot`), a fleet of echo servers (one per node), then runs the same workload twice:

- fleet:  each episode takes `fleet.client()` (least-loaded server), reset, N steps, close;
- direct: each episode opens `GenericEnvClient(url)` on the servers round-robin.

With `--image`, the servers are containers of that image (`RayFleet(image=...)`, the node's
engine at `DOCKER_HOST`). With `--lifecycle`, it times instead: the fleet's start, a node removed
until its server stops answering and until the fleet stops handing it out, a node added until the
replacement answers, and `close()`.

    .venv/bin/python benchmarks/bench_fleet.py --nodes 2 --episodes 200 --steps 10 --threads 8
    .venv/bin/python benchmarks/bench_fleet.py --image openenv-test-echo:latest --lifecycle
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import ray
from ray.cluster_utils import Cluster

from openenv_sdk.client import GenericEnvClient
from openenv_sdk.fleet import RayFleet

ECHO = Path(__file__).resolve().parents[1] / "environments" / "echo"
SLOT = {"env_slot": 1.0}


def _run(make_client: Callable[[], Any], episodes: int, steps: int, threads: int) -> tuple[float, float, float]:
    latencies: list[float] = []
    lock = threading.Lock()

    def episode(i: int) -> None:
        mine = []
        with make_client() as env:
            env.reset(seed=i)
            for s in range(steps):
                t = time.perf_counter()
                env.step({"message": f"{i}-{s}"})
                mine.append(time.perf_counter() - t)
        with lock:
            latencies.extend(mine)

    started = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(episode, range(episodes)))
    elapsed = time.perf_counter() - started
    q = statistics.quantiles(latencies, n=100)
    return episodes / elapsed, q[49] * 1000, q[98] * 1000


def _until(condition: Callable[[], bool], timeout_s: float = 120.0) -> float:
    """Seconds until `condition()` holds."""
    started = time.perf_counter()
    while not condition():
        if time.perf_counter() - started > timeout_s:
            raise TimeoutError(f"not within {timeout_s:g} s")
        time.sleep(0.02)
    return time.perf_counter() - started


def _answers(url: str) -> bool:
    try:
        return httpx.get(f"{url}/health", timeout=0.5).status_code == 200
    except httpx.HTTPError:
        return False


def _lifecycle(cluster: Cluster, make_fleet: Callable[[], RayFleet]) -> list[tuple[str, float]]:
    rows = []
    started = time.perf_counter()
    fleet = make_fleet().start()
    rows.append((f"a fleet of {fleet.size} servers is up (`start()`)", time.perf_counter() - started))
    try:
        node = cluster.list_all_nodes()[-1]
        lost = next(s for s in fleet.servers() if s.node_id == node.node_id)
        assert lost.url is not None
        started = time.perf_counter()
        cluster.remove_node(node)
        _until(lambda: not _answers(lost.url))
        rows.append(("a node is removed: its server stops answering", time.perf_counter() - started))
        _until(lambda: lost.url not in fleet.urls)
        rows.append(("... and the fleet stops handing it out", time.perf_counter() - started))
        started = time.perf_counter()
        cluster.add_node(num_cpus=1, resources=SLOT)
        rows.append(("a node is added: the replacement server answers on it", _until(lambda: len(fleet.urls) == fleet.size)))
    finally:
        started = time.perf_counter()
        fleet.close()
        rows.append(("`close()`", time.perf_counter() - started))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--image", default=None, help="run the servers as containers of this echo image")
    parser.add_argument("--lifecycle", action="store_true", help="time start, a lost node, a replacement, close")
    args = parser.parse_args()

    started = time.perf_counter()
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 1, "resources": SLOT, "include_dashboard": False,
            # a dead raylet noticed in about 2 s, as in tests/fleet
            "_system_config": {"health_check_period_ms": 500, "health_check_failure_threshold": 3},
        },
    )  # fmt: skip
    for _ in range(args.nodes - 1):
        cluster.add_node(num_cpus=1, resources=SLOT)
    cluster.wait_for_nodes()
    cluster_s = time.perf_counter() - started
    ray.init(address=cluster.address, log_to_driver=False)
    servers_kind = f"containers of {args.image}" if args.image else "processes"

    def make_fleet() -> RayFleet:
        return RayFleet(
            ECHO, size=args.nodes, image=args.image, num_cpus=1, memory_bytes=64 * 2**20, resources=SLOT,
            probe_interval_s=0.2, probe_timeout_s=1.0,
        )  # fmt: skip

    if args.lifecycle:
        try:
            rows = _lifecycle(cluster, make_fleet)
        finally:
            ray.shutdown()
            cluster.shutdown()
        print(f"{args.nodes} nodes, servers: {servers_kind}")
        print(f"{'the ' + str(args.nodes) + '-node cluster starts':58} {cluster_s:6.2f} s")
        for what, seconds in rows:
            print(f"{what:58} {seconds:6.2f} s")
        return
    try:
        with make_fleet() as fleet:
            servers = fleet.servers()
            rotation = itertools.cycle(servers)
            rotation_lock = threading.Lock()

            def direct() -> GenericEnvClient:
                with rotation_lock:
                    server = next(rotation)
                return GenericEnvClient(server.url, orchestrator_token=server.orchestrator_token)

            _run(direct, min(20, args.episodes), args.steps, args.threads)  # warm up both servers
            rows = [
                ("direct", *_run(direct, args.episodes, args.steps, args.threads)),
                ("fleet", *_run(fleet.client, args.episodes, args.steps, args.threads)),
            ]
    finally:
        ray.shutdown()
        cluster.shutdown()
    print(f"{args.nodes} nodes, {args.episodes} episodes x {args.steps} steps, {args.threads} threads, servers: {servers_kind}")
    print(f"{'path':8} {'episodes/s':>11} {'p50 step ms':>12} {'p99 step ms':>12}")
    for name, eps, p50, p99 in rows:
        print(f"{name:8} {eps:11.1f} {p50:12.2f} {p99:12.2f}")


if __name__ == "__main__":
    main()
