"""Episodes/s and p99 step latency through `RayFleet.client()` against direct clients of the same servers.

Starts a Ray cluster on this machine (`ray.cluster_utils.Cluster`, one raylet per node, each with
one `env_slot`), a fleet of echo servers (one per node), then runs the same workload twice:

- fleet:  each episode takes `fleet.client()` (least-loaded server), reset, N steps, close;
- direct: each episode opens `GenericEnvClient(url)` on the servers round-robin.

    .venv/bin/python benchmarks/bench_fleet.py --nodes 2 --episodes 200 --steps 10 --threads 8
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--threads", type=int, default=8)
    args = parser.parse_args()

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "resources": SLOT, "include_dashboard": False})
    for _ in range(args.nodes - 1):
        cluster.add_node(num_cpus=1, resources=SLOT)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)
    try:
        with RayFleet(ECHO, size=args.nodes, num_cpus=1, memory_bytes=64 * 2**20, resources=SLOT) as fleet:
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
    print(f"{args.nodes} nodes, {args.episodes} episodes x {args.steps} steps, {args.threads} threads")
    print(f"{'path':8} {'episodes/s':>11} {'p50 step ms':>12} {'p99 step ms':>12}")
    for name, eps, p50, p99 in rows:
        print(f"{name:8} {eps:11.1f} {p50:12.2f} {p99:12.2f}")


if __name__ == "__main__":
    main()
