"""verl (0.9): any openenv-sdk environment as a verl agent loop whose tools are the environment's.

    # agent_loops.yaml, named by actor_rollout_ref.rollout.agent.agent_loop_config_path
    - name: openenv
      _target_: openenv_trainers.adapters.verl.OpenEnvAgentLoop
      env_dir: environments/wordle        # or base_url: / image:; grader: package.module:Name

Rows whose `agent_name` is `openenv` play one episode each: `OpenEnvAgentLoop` is verl's own
`ToolAgentLoop` (token-in, token-out generation on verl's server, its tool-call parser, response
mask and logprobs) with three changes:

- its tools are the environment's, one `OpenEnvTool` (a verl `BaseTool`) per MCP tool with the
  server's schema, rendered into the prompt as the server lists them;
- each trajectory opens a session, reset with the row's `extra_info["reset"]`, and every tool
  call runs there, over MCP, as the agent's would;
- when the trajectory ends the host-side grader grades the session: its score is the output's
  `reward_score` (verl then skips its reward function for that sample), its components are in
  `extra_fields["openenv_components"]`, and the session is closed.

A folder or an image is served once per process and shared by every trajectory (verl builds an
agent loop per trajectory). A failing tool is the model's to see, as verl shows tool errors.

A failure is never a reward (docs/failures.md): a trajectory whose reset failed, whose sandbox was
killed while grading, whose judge answered HTTP 500 comes back with `response_mask` all 0 (nothing
to train on), `reward_score` 0.0 (verl needs a number) and its cause in
`extra_fields["openenv_failure"]`. verl's GRPO would still count that 0 in its group's mean: run
with `algorithm.adv_estimator=openenv_grpo` (registered by importing this module), verl's own GRPO
over each group's surviving trajectories alone (a row with no sampled token is a failure); a group
left with fewer than 2 gets advantage 0 everywhere.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Any

import numpy as np
import torch
from verl.experimental.agent_loop.agent_loop import AgentLoopMetrics, AgentLoopOutput
from verl.experimental.agent_loop.tool_agent_loop import ToolAgentLoop
from verl.tools.base_tool import BaseTool
from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse
from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage, register_adv_est

from openenv_sdk.errors import EpisodeFailed, ToolCallError
from openenv_sdk.failures import Failure, classify
from openenv_sdk.rubric import agrade

from ..chat import tool_result_text, tool_schemas
from ..sources import EnvSource
from ._common import shared_source

__all__ = ["ADV_ESTIMATOR", "SESSION_KEY", "OpenEnvAgentLoop", "OpenEnvTool", "agent_loop_config", "surviving_grpo_advantage"]

ADV_ESTIMATOR = "openenv_grpo"
"""verl's `algorithm.adv_estimator` for GRPO over the surviving trajectories (`surviving_grpo_advantage`)."""

SESSION_KEY = "__openenv_session__"
"""Where a trajectory's session rides in its `tools_kwargs` (verl hands those to each tool call)."""


class OpenEnvTool(BaseTool):
    """One MCP tool of the environment, called in the trajectory's session.

    verl creates and releases a tool instance around every call; the session belongs to the
    trajectory (`OpenEnvAgentLoop`), so this tool holds no state of its own.
    """

    def __init__(self, schema: dict[str, Any]) -> None:
        # BaseTool.__init__ prints the schema; this takes the parts without the noise.
        self.config: dict[str, Any] = {}
        self.tool_schema = OpenAIFunctionToolSchema.model_validate(_verl_schema(schema))
        self.name = self.tool_schema.function.name

    async def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs: Any) -> tuple[ToolResponse, float, dict]:
        agent_data = kwargs.get("agent_data")
        session = (getattr(agent_data, "tools_kwargs", None) or {}).get(SESSION_KEY)
        if session is None:
            raise RuntimeError(f"tool {self.name!r} runs only inside OpenEnvAgentLoop (no session for this trajectory)")
        try:
            result = await session.call_tool(self.name, **parameters)
        except ToolCallError as e:  # unknown tool, bad arguments: the agent's mistake, shown to it
            return ToolResponse(text=f"error: {e}"), 0.0, {"tool_error": 1}
        text, failed = tool_result_text(result)
        return ToolResponse(text=text), 0.0, {"tool_error": int(failed)}


def _verl_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A tool schema in the subset verl's `OpenAIFunctionToolSchema` accepts: each property needs a
    `type`, which a JSON Schema union (`anyOf`, as pydantic writes `int | None`) leaves out. The
    prompt still shows the server's own schema; this one only serves verl's tool-call parser."""
    function = dict(schema["function"])
    parameters = dict(function.get("parameters") or {"type": "object", "properties": {}})
    properties = {}
    for name, prop in (parameters.get("properties") or {}).items():
        prop = dict(prop)
        if "type" not in prop:
            options = prop.get("anyOf") or prop.get("oneOf") or []
            types = [o["type"] for o in options if isinstance(o, dict) and isinstance(o.get("type"), str)]
            prop["type"] = types if len(types) > 1 else (types[0] if types else "string")
        properties[name] = prop
    parameters["properties"] = properties
    parameters.setdefault("type", "object")
    function["parameters"] = parameters
    function.setdefault("description", "")
    return {"type": schema.get("type", "function"), "function": function}


class OpenEnvAgentLoop(ToolAgentLoop):
    """verl's tool agent loop over one openenv-sdk environment (see the module docstring)."""

    def __init__(
        self,
        *args: Any,
        env_dir: str | None = None,
        base_url: str | None = None,
        image: str | None = None,
        grader: str | None = None,
        **kwargs: Any,
    ) -> None:
        """verl builds it per trajectory (`hydra.utils.instantiate` of the agent loop config,
        whose extra keys arrive here); the environment's server is shared across them.

        Raises:
            ValueError: not exactly one of `env_dir`, `base_url`, `image`; or no grader found.
        """
        kwargs.pop("tools", None)  # the loop's tools are the environment's
        super().__init__(*args, tools=None, **kwargs)
        config = {"env_dir": env_dir, "base_url": base_url, "image": image, "grader": grader}
        self.source, self.grader = shared_source(config)
        schemas = _server_tools(self.source)
        self.tools = {s["function"]["name"]: OpenEnvTool(s) for s in schemas}
        self.tool_schemas = schemas

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        """One trajectory in a fresh session, graded host-side; the session is closed after.

        A failed trajectory (reset, grading) is an output with nothing to train on and its
        cause (see the module docstring), never a raise that ends the step.
        """
        extra_info = kwargs.get("extra_info") or {}
        reset = dict(extra_info.get("reset") or {})
        await asyncio.to_thread(self.source.start)  # a folder's or image's server starts off the event loop
        output: AgentLoopOutput | None = None
        try:
            async with self.source.async_client() as session:
                try:
                    await session.reset(**reset)
                except Exception as e:
                    raise EpisodeFailed(classify(e, stage="reset")) from e
                tools_kwargs = {**(kwargs.get("tools_kwargs") or {}), SESSION_KEY: session}
                output = await super().run(sampling_params, **{**kwargs, "tools_kwargs": tools_kwargs})
                score = await agrade(self.grader, session)
        except EpisodeFailed as e:
            return await self._failed(kwargs, e.failure, output)
        output.reward_score = float(score.value)
        output.extra_fields["openenv_components"] = dict(score.components)
        return output

    async def _failed(self, kwargs: dict[str, Any], failure: Failure, output: AgentLoopOutput | None) -> AgentLoopOutput:
        if output is None:  # no episode ran: the prompt, and one end-of-turn token nothing trains on
            prompt_ids = await self.apply_chat_template(list(kwargs["raw_prompt"]), tools=self.tool_schemas)
            tokenizer: Any = self.tokenizer  # verl types it as AutoTokenizer, the factory
            eos = int(tokenizer.eos_token_id)
            output = AgentLoopOutput(
                prompt_ids=prompt_ids, response_ids=[eos], response_mask=[0],
                response_logprobs=[0.0], num_turns=1, metrics=AgentLoopMetrics(),
            )  # fmt: skip
        output.response_mask = [0] * len(output.response_ids)
        output.reward_score = 0.0
        output.extra_fields["openenv_failure"] = failure.cause.value
        output.extra_fields["openenv_components"] = {}
        return output


@register_adv_est(ADV_ESTIMATOR)
def surviving_grpo_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray,
    epsilon: float = 1e-6,
    norm_adv_by_std_in_grpo: bool = True,
    config: Any = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """verl's `compute_grpo_outcome_advantage` over the surviving rows alone: a row with no sampled
    token (`response_mask` all 0, a failed trajectory) is left out of its group's mean and std and
    gets advantage 0; so does every row of a group left with fewer than 2 survivors."""
    survived = response_mask.sum(dim=-1) > 0
    counts: dict[Any, int] = {}
    for i in range(len(index)):
        if survived[i]:
            counts[index[i]] = counts.get(index[i], 0) + 1
    keep = torch.tensor([bool(survived[i]) and counts.get(index[i], 0) >= 2 for i in range(len(index))], dtype=torch.bool)
    advantages = torch.zeros_like(token_level_rewards)
    if keep.any():
        rows = keep.nonzero(as_tuple=True)[0]
        kept, _ = compute_grpo_outcome_advantage(
            token_level_rewards[rows], response_mask[rows], np.asarray(index, dtype=object)[rows.numpy()],
            epsilon=epsilon, norm_adv_by_std_in_grpo=norm_adv_by_std_in_grpo, config=config,
        )  # fmt: skip
        advantages[rows] = kept
    return advantages, advantages


_TOOLS: weakref.WeakKeyDictionary[EnvSource, list[dict[str, Any]]] = weakref.WeakKeyDictionary()


def _server_tools(source: EnvSource) -> list[dict[str, Any]]:
    """The server's tools as OpenAI function schemas, read once per source (a blocking `/schema`
    request, made by the first trajectory only)."""
    tools = _TOOLS.get(source)
    if tools is None:
        tools = _TOOLS[source] = tool_schemas(source.tools())
    return tools


def agent_loop_config(name: str = "openenv", **environment: Any) -> dict[str, Any]:
    """One entry of verl's agent loop config file (`agent_loop_config_path`): `name`, the loop's
    `_target_`, and the environment (`env_dir` | `base_url` | `image`, optional `grader`)."""
    return {"name": name, "_target_": f"{__name__}.OpenEnvAgentLoop", **environment}
