"""SkyRL (`skyrl-gym` 0.4): any openenv-sdk environment as a text-in, observations-out `skyrl_gym` env.

    from openenv_trainers.adapters.skyrl import register_openenv
    register_openenv("openenv")          # skyrl_gym.make("openenv", env_config=..., extras=...)

SkyRL's generator makes one env per trajectory (`skyrl_gym.make(env_class, env_config=cfg[env_class],
extras=row["env_extras"])`), calls `init(prompt)`, then `step(model_text)` until `done`, then
`get_metrics()` and `close()`. Here:

- `env_config` names the environment (`env_dir`, `base_url` or `image`) and the grader
  (`grader: package.module:Name`, default the folder's). A folder or an image is served once per
  process and shared by every env made from the same config (`close_sources()` stops them).
- `extras["reset"]` holds the task's reset arguments; `extras["max_turns"]` (set by SkyRL's
  generator) bounds the assistant turns.
- `init` resets a fresh session and puts the server's tools in the system message, in the
  Hermes/Qwen `<tools>` format (SkyRL's generator renders the chat without `tools=`).
- `step` runs each `<tool_call>{"name": ..., "arguments": ...}</tool_call>` of the model's text as
  the agent would, over MCP in that session, and returns the results as `tool` messages. A turn
  without a tool call, or the last allowed turn, ends the episode: the host-side grader grades the
  session, its score is the step's reward (earlier steps give 0), and the session is closed.

Token ids and logprobs stay SkyRL's (its generator is token-in, token-out); this env only sees text.

A failure is never a reward (docs/failures.md): a reset that fails raises `EpisodeFailed` (cause
`reset`) from `init`, and grading that cannot decide (a sandbox killed, a judge's HTTP 500)
raises `EpisodeFailed` from the last `step`, its cause in `failure` too, after the session is
closed. The trajectory has no reward: it must not enter its group's advantages (the GRPO of the
group's surviving trajectories, `openenv_trainers.advantages.surviving_advantages`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput

from openenv_sdk.errors import EpisodeFailed, ToolCallError
from openenv_sdk.failures import Failure, classify
from openenv_sdk.prompt import observation_text
from openenv_sdk.rubric import Score, grade

from ..chat import tool_result_text, tool_schemas
from ._common import close_shared_sources, shared_source

__all__ = ["OpenEnvSkyRLEnv", "close_sources", "parse_tool_calls", "register_openenv", "tools_system_prompt"]

_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)


def close_sources() -> None:
    """Stop every server this process started for SkyRL envs (also run at exit)."""
    close_shared_sources()


def tools_system_prompt(tools: list[dict[str, Any]]) -> str:
    """The tools as Qwen2.5/Hermes chat templates render them into the system message."""
    lines = "\n".join(json.dumps(t, ensure_ascii=False) for t in tools)
    return (
        "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
        "You are provided with function signatures within <tools></tools> XML tags:\n"
        f"<tools>\n{lines}\n</tools>\n\n"
        "For each function call, return a json object with function name and arguments within "
        "<tool_call></tool_call> XML tags:\n<tool_call>\n"
        '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
    )


def parse_tool_calls(text: str) -> list[tuple[str, Any]]:
    """The `(name, arguments)` of each `<tool_call>` block; a block that does not parse is
    `("", raw text)`, so the policy is told its mistake instead of the episode failing."""
    calls: list[tuple[str, Any]] = []
    for body in _TOOL_CALL.findall(text):
        try:
            call = json.loads(body)
        except ValueError:
            calls.append(("", body))
            continue
        if not isinstance(call, Mapping):
            calls.append(("", body))
            continue
        arguments = call.get("arguments", {})
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except ValueError:
                pass
        calls.append((str(call.get("name") or ""), arguments))
    return calls


class OpenEnvSkyRLEnv(BaseTextEnv):
    """One trajectory in one session of an openenv-sdk environment (see the module docstring)."""

    def __init__(self, env_config: Mapping[str, Any] | None = None, extras: Mapping[str, Any] | None = None) -> None:
        """Describe the episode; the session opens in `init`.

        Args:
            env_config: `env_dir` | `base_url` | `image` (exactly one), and optionally `grader`
                (`package.module:Name`), `tools_in_prompt` (default true), `observation_role`
                (default `tool`), `startup_timeout_s`, `client_timeout_s`.
            extras: the row's `reset` arguments, and `max_turns` (default 8).

        Raises:
            ValueError: the config names no environment or several, or no grader can be found.
        """
        super().__init__()
        config = dict(env_config or {})
        extras = dict(extras or {})
        self.source, self.grader = shared_source(config)
        self.reset_kwargs: dict[str, Any] = dict(extras.get("reset") or {})
        self.max_turns = int(extras.get("max_turns") or 8)
        self.tools_in_prompt = bool(config.get("tools_in_prompt", True))
        self.observation_role = str(config.get("observation_role", "tool"))
        self.session: Any = None
        self.tools: list[dict[str, Any]] = []
        """The server's tools as OpenAI function schemas (after `init`)."""
        self.score: Score | None = None
        """The grader's score, once the episode is done."""
        self.failure: Failure | None = None
        """Why the episode has no reward, when it failed (reset or grading)."""
        self.tool_calls = 0
        self.tool_errors = 0

    def init(self, prompt: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Reset a fresh session with the task; the prompt gains the tools (and, when it has no
        user message, the reset observation as one).

        Raises:
            openenv_sdk.errors.EpisodeFailed: the environment could not be reset (cause `reset`):
                no episode, no reward.
        """
        self.close()
        self.session = self.source.client()
        try:
            result = self.session.reset(**self.reset_kwargs)
            self.tools = tool_schemas(self.session.schema().tools)
        except Exception as e:
            self.close()
            self.failure = classify(e, stage="reset")
            raise EpisodeFailed(self.failure) from e
        except BaseException:
            self.close()
            raise
        messages = [dict(m) for m in prompt]
        if not any(m.get("role") == "user" for m in messages):
            messages.append({"role": "user", "content": observation_text(result.observation)})
        if self.tools_in_prompt and self.tools:
            block = tools_system_prompt(self.tools)
            if messages and messages[0].get("role") == "system":
                messages[0]["content"] = f"{messages[0].get('content') or ''}\n\n{block}".lstrip()
            else:
                messages.insert(0, {"role": "system", "content": block})
        return messages, {"tools": self.tools}

    def step(self, action: str) -> BaseTextEnvStepOutput:  # type: ignore[override]  # as skyrl_gym's BaseTextEnv.step narrows Env.step
        """Run the turn's tool calls; grade when the episode ends (no call, or the last turn).

        Raises:
            RuntimeError: `step` before `init`, or after the episode ended.
            openenv_sdk.errors.EpisodeFailed: grading could not decide (its cause in `failure`).
            openenv_sdk.errors.OpenEnvError: the environment failed (a failing tool does not:
                its message is the observation).
        """
        if self.session is None:
            raise RuntimeError("step() before init(), or after the episode ended")
        self.turns += 1
        calls = parse_tool_calls(action)
        if not calls or self.turns >= self.max_turns:
            return BaseTextEnvStepOutput(
                observations=[], reward=self._finish(), done=True, metadata={"tool_calls": len(calls)}, postprocessed_action=None
            )
        observations = []
        for name, arguments in calls:
            text = self._call(name, arguments)
            observations.append({"role": self.observation_role, "content": text})
        return BaseTextEnvStepOutput(
            observations=observations, reward=0.0, done=False, metadata={"tool_calls": len(calls)}, postprocessed_action=None
        )

    def _call(self, name: str, arguments: Any) -> str:
        self.tool_calls += 1
        if not name:
            self.tool_errors += 1
            return f"error: the tool call does not parse as a JSON object with a name: {arguments!r}"
        if not isinstance(arguments, Mapping):
            self.tool_errors += 1
            return f"error: the arguments of {name!r} must be a JSON object, got {arguments!r}"
        try:
            result = self.session.call_tool(name, **arguments)
        except ToolCallError as e:  # unknown tool, bad arguments: the agent's mistake, shown to it
            self.tool_errors += 1
            return f"error: {e}"
        text, failed = tool_result_text(result)
        self.tool_errors += failed
        return text

    def _finish(self) -> float:
        try:
            self.score = grade(self.grader, self.session)
        except EpisodeFailed as e:
            self.failure = e.failure
            raise
        finally:
            self.close()
        return float(self.score.value)

    def get_metrics(self) -> dict[str, Any]:
        metrics: dict[str, Any] = {"tool_calls": self.tool_calls, "tool_errors": self.tool_errors, "turns": self.turns}
        if self.score is not None:
            metrics.update({f"openenv/{k}": v for k, v in self.score.components.items()})
        if self.failure is not None:
            metrics[f"openenv/failure/{self.failure.cause.value}"] = 1
        return metrics

    def close(self) -> None:
        """Close the session (the server stays, shared). Safe to call twice."""
        session, self.session = self.session, None
        if session is not None:
            session.close()


def register_openenv(env_id: str = "openenv", **kwargs: Any) -> None:
    """Register `OpenEnvSkyRLEnv` with skyrl-gym under `env_id` (`skyrl_gym.make(env_id, ...)`);
    `kwargs` go to `skyrl_gym.register` (default `env_config` values, say). Registering an id
    twice is refused by skyrl-gym."""
    import skyrl_gym

    skyrl_gym.register(id=env_id, entry_point=f"{__name__}:OpenEnvSkyRLEnv", **kwargs)
