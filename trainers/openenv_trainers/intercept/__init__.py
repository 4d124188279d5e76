"""Black-box agents in the sandbox: their model calls intercepted on the host, answered by the policy.

- `InterceptionServer`: per episode, OpenAI chat completions (`/rollout/{id}/v1/chat/completions`),
  the OpenAI Responses API (`.../v1/responses`) and Anthropic Messages (`.../v1/messages`), streamed
  or not, decoded into one internal form (`ModelCall`); a per-rollout secret, requests queued
  until the trainer answers, host tools from an allowlist.
- `ScriptedBackend`: a policy whose turns are written in advance, as tokens (tests, examples).
- `run_agent_episode` / `AgentEpisodeRunner`: one episode of an agent (an `openenv_sdk.agents.AgentSpec`)
  run by the environment (`run_agent`), every model call answered with the policy and recorded
  with exact token ids, masks and logprobs; `AgentEpisodeRunner` plugs into `EnvRolloutWorker`.
"""

from ..episode import Segment
from .dialect import Answer, ModelCall
from .episode import (
    AgentEpisodeConfig,
    AgentEpisodeResult,
    AgentEpisodeRunner,
    ConversationRecorder,
    run_agent_episode,
)
from .messages import normalize_messages, normalize_tools
from .scripted import ScriptedBackend, assistant_turn
from .server import DIALECTS, InterceptedRequest, InterceptionServer, Rollout

__all__ = [
    "DIALECTS",
    "AgentEpisodeConfig",
    "AgentEpisodeResult",
    "AgentEpisodeRunner",
    "Answer",
    "ConversationRecorder",
    "InterceptedRequest",
    "InterceptionServer",
    "ModelCall",
    "Rollout",
    "ScriptedBackend",
    "Segment",
    "assistant_turn",
    "normalize_messages",
    "normalize_tools",
    "run_agent_episode",
]
