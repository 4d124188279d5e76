"""Black-box agents in the sandbox: their model calls intercepted on the host, answered by the policy.

- `InterceptionServer`: `POST /rollout/{id}/v1/chat/completions` per episode, a per-rollout secret,
  requests queued until the trainer answers, host tools from an allowlist.
- `run_agent_episode` / `AgentEpisodeRunner`: one episode of an agent (an `openenv_sdk.agents.AgentSpec`)
  run by the environment (`run_agent`), every model call answered with the policy and recorded
  with exact token ids, masks and logprobs; `AgentEpisodeRunner` plugs into `EnvRolloutWorker`.
"""

from ..episode import Segment
from .episode import (
    AgentEpisodeConfig,
    AgentEpisodeResult,
    AgentEpisodeRunner,
    run_agent_episode,
)
from .messages import normalize_messages, normalize_tools
from .server import InterceptedRequest, InterceptionServer, Rollout

__all__ = [
    "AgentEpisodeConfig",
    "AgentEpisodeResult",
    "AgentEpisodeRunner",
    "InterceptedRequest",
    "InterceptionServer",
    "Rollout",
    "Segment",
    "normalize_messages",
    "normalize_tools",
    "run_agent_episode",
]
