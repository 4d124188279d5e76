"""Adapters for third-party RL trainers: any openenv-sdk environment through each trainer's own interface.

    verifiers   `verifiers` 0.4 (prime-rl): a taskset, an `Env` and a harness that `vf-eval` loads
    skyrl       `skyrl-gym` 0.4: a `skyrl_gym` `Env` whose tool calls go to the environment over MCP
    art         `openpipe-art` 0.5: a rollout helper returning `art.Trajectory` objects
    verl        `verl` 0.9: an agent loop (verl's `ToolAgentLoop`) over the environment's tools, graded

Each keeps the SDK's guarantees: the reward is the host-side grader's, the tools and their schemas
come from the server, every session is closed, and failures are typed (`openenv_sdk.errors`). The
modules import their trainer lazily: this package imports none of them.
"""
