"""GRPOTrainer's adapters drawing their sessions from a RayFleet on a 2-raylet local Ray cluster
(`EnvSource(fleet=...)`): a step's episodes spread over both nodes' servers; a node lost between
steps costs only its sessions, and their episodes run again on the survivor."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

ray = pytest.importorskip("ray")

from openenv_trainers.echo_task import echo_rows  # noqa: E402
from openenv_trainers.rollout import EnvRolloutFunc, env_reward  # noqa: E402
from openenv_trainers.sources import EnvSource, SessionPool  # noqa: E402
from openenv_trainers.trl_env import EnvironmentFactory  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402

from openenv_sdk.errors import ClientStateError  # noqa: E402
from openenv_sdk.fleet import RayFleet  # noqa: E402

from .conftest import ECHO_DIR, cpu_grpo_args, echo_rubric  # noqa: E402

SLOT = {"env_slot": 1.0}


@dataclass
class TwoNodes:
    cluster: Cluster
    fleet: RayFleet
    node: Any
    """The node that is lost after the first step."""
    survivor: str
    """The URL of the other node's server."""

    def lose_node(self) -> None:
        """Remove the node and wait until the fleet hands out no new session on it."""
        self.cluster.remove_node(self.node)
        deadline = time.monotonic() + 30
        while len(self.fleet.urls) != 1:
            assert time.monotonic() < deadline, "the fleet did not notice the lost node"
            time.sleep(0.1)


@pytest.fixture
def two_nodes() -> Iterator[TwoNodes]:
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 1, "resources": SLOT, "include_dashboard": False,
            "_system_config": {"health_check_period_ms": 500, "health_check_failure_threshold": 3},
        },
    )  # fmt: skip
    node = cluster.add_node(num_cpus=1, resources=SLOT)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)
    try:
        with RayFleet(
            ECHO_DIR, size=2, num_cpus=1, memory_bytes=64 * 2**20, resources=SLOT, startup_timeout_s=60,
            client_timeout_s=30, probe_interval_s=0.2, probe_timeout_s=1.0,
        ) as fleet:  # fmt: skip
            survivor = next(s.url for s in fleet.servers() if s.node_id != node.node_id)
            assert survivor is not None
            yield TwoNodes(cluster, fleet, node, survivor)
    finally:
        ray.shutdown()
        cluster.shutdown()


class NodeLosingRollouts(EnvRolloutFunc):
    """Records the fleet's open sessions per server after every call; loses a node after the first."""

    def __init__(self, *args: Any, nodes: TwoNodes, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.nodes = nodes
        self.loads: list[dict[str, int]] = []

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        output = super().__call__(prompts, trainer)
        assert len(self.last_episodes) == len(prompts)
        self.loads.append(self.nodes.fleet.load())
        if len(self.loads) == 1:
            self.nodes.lose_node()
        return output


def test_rollout_func_draws_sessions_from_a_fleet_and_survives_a_lost_node(
    two_nodes: TwoNodes, model: Any, tokenizer: Any
) -> None:
    from datasets import Dataset
    from trl import GRPOTrainer

    fleet = two_nodes.fleet
    assert isinstance(fleet, SessionPool)
    source = EnvSource(fleet=fleet)
    assert source.name == "fleet-echo" and not source.can_restart and source.env_dir == fleet.env_dir
    with pytest.raises(ClientStateError, match="fleet: Ray replaces its servers"):
        source.restart()
    rollouts = NodeLosingRollouts(source, rubric=echo_rubric(), max_turns=3, max_turn_tokens=48, nodes=two_nodes)
    args = cpu_grpo_args(
        "fleet-rollout", per_device_train_batch_size=8, num_generations=4, max_completion_length=128,
        max_steps=2, learning_rate=1e-3, temperature=0.8,
    )  # fmt: skip
    trainer = GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        reward_funcs=[env_reward],
        args=args,
        train_dataset=Dataset.from_list(echo_rows(16)),
        rollout_func=rollouts,
        callbacks=[rollouts.closer()],
    )
    trainer.train()
    # Step 1: the 8 episodes' sessions spread by load over both nodes' servers.
    assert len(rollouts.loads) == 2
    assert sorted(rollouts.loads[0].values()) == [4, 4]
    # Step 2: the lost node's 4 sessions failed; their episodes ran again on the survivor.
    assert rollouts.loads[1] == {two_nodes.survivor: 8}
    logged = [h["rewards/env_reward/mean"] for h in trainer.state.log_history if "rewards/env_reward/mean" in h]
    assert len(logged) == 2
    # The closer closed every session (their places freed); the fleet itself is the caller's.
    assert fleet.load() == {two_nodes.survivor: 0}
    with fleet.client() as env:
        env.reset()


def test_environment_factory_draws_sessions_from_a_fleet_and_survives_a_lost_node(
    two_nodes: TwoNodes, model: Any, tokenizer: Any
) -> None:
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOTrainer

    fleet = two_nodes.fleet
    factory = EnvironmentFactory(EnvSource(fleet=fleet), rubric=echo_rubric(), class_name="EchoEnv")
    loads: list[dict[str, int]] = []

    class LoseANodeAfterTheFirstStep(TrainerCallback):
        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            loads.append(fleet.load())
            if len(loads) == 1:
                two_nodes.lose_node()

    args = cpu_grpo_args(
        "fleet-factory", per_device_train_batch_size=4, num_generations=4, max_completion_length=96,
        max_tool_calling_iterations=2, max_steps=2, learning_rate=1e-3, temperature=0.8,
    )  # fmt: skip
    trainer = GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        args=args,
        train_dataset=Dataset.from_list(echo_rows(16)),
        environment_factory=factory,
        callbacks=[LoseANodeAfterTheFirstStep(), factory.closer()],
    )
    trainer.train()
    # TRL's pool of 4 environments: their sessions spread over both servers, then all on the
    # survivor once the lost node's 2 sessions were replaced at the next reset.
    assert sorted(loads[0].values()) == [2, 2]
    assert loads[1] == {two_nodes.survivor: 4}
    logs = [h for h in trainer.state.log_history if "rewards/EchoEnv/mean" in h]
    assert len(logs) == 2
    assert factory.instances == []
    assert fleet.load() == {two_nodes.survivor: 0}
