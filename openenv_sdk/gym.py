"""`GymEnv`: a Gymnasium environment over a (sync) client of an environment server.

Observations and actions are JSON text, in `JsonText` spaces (Gymnasium `Text` spaces whose
characters are printable ASCII: `json.dumps(..., ensure_ascii=True)` never leaves that set).
An observation is the JSON of the server's observation (without `reward` and `done`, which
become the step's reward and `terminated`); an action is the JSON of an action (or of a
tool call, `{"tool": name, "arguments": {...}}`). `JsonText.sample()` of the action space
gives an action valid against the server's action schema, so random policies exercise `step`.

Rewards: a step's reward is the environment's own (0.0 when it gives none); with a host-side
grader (`grader=`, or the one an environment folder's `openenv.yaml` names when the client
serves that folder), the last step of an episode (terminated, or truncated by `max_steps`)
gives the grader's reward instead, as `openenv eval` would score the episode.

Gymnasium is an optional dependency: `pip install 'openenv-sdk[gym]'`.
"""

from __future__ import annotations

import json
import string
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

try:
    import gymnasium
    from gymnasium import spaces
except ImportError as e:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "openenv_sdk.gym needs gymnasium, an optional dependency: pip install 'openenv-sdk[gym]'"
    ) from e

import numpy as np

from .errors import InvalidActionError
from .loader import load_grader
from .manifest import load_manifest
from .rubric import Score, grade

if TYPE_CHECKING:
    from .client import EnvClient
    from .types import ToolSchema

__all__ = ["DEFAULT_MAX_LENGTH", "GymEnv", "JsonText"]

DEFAULT_MAX_LENGTH = 1 << 20
"""Default longest JSON text of an observation or action, in characters."""

_CHARSET = string.printable
_SAMPLE_LETTERS = string.ascii_letters + string.digits + " "


class JsonText(spaces.Text):
    """A `Text` space of JSON documents.

    `contains(x)`: `x` is a string of printable ASCII, at most `max_length` long, that parses
    as JSON. With a `schema`, `sample()` returns a document valid against it (required
    properties only); with `tools` and an action schema that asks for nothing, it samples a
    tool call instead.
    """

    def __init__(
        self,
        max_length: int = DEFAULT_MAX_LENGTH,
        *,
        schema: dict[str, Any] | None = None,
        tools: list[ToolSchema] | None = None,
        seed: int | np.random.Generator | None = None,
    ) -> None:
        super().__init__(max_length=max_length, min_length=1, charset=_CHARSET, seed=seed)
        self.schema = schema
        self.tools = list(tools or [])

    def contains(self, x: Any) -> bool:
        if not super().contains(x):
            return False
        try:
            json.loads(x)
        except ValueError:
            return False
        return True

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        if mask is not None or probability is not None or self.schema is None:
            return super().sample(mask=mask, probability=probability)
        required = set(self.schema.get("required") or [])
        if self.tools and not required - {"metadata"}:
            tool = self.tools[int(self.np_random.integers(len(self.tools)))]
            arguments = _instance(tool.input_schema, tool.input_schema, self.np_random)
            value: Any = {"tool": tool.name, "arguments": arguments}
        else:
            value = _instance(self.schema, self.schema, self.np_random)
        text = json.dumps(value, ensure_ascii=True)
        return text if len(text) <= self.max_length else "{}"

    def __repr__(self) -> str:
        return f"JsonText(max_length={self.max_length})"


def _resolve(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    for _ in range(32):
        ref = schema.get("$ref")
        if not isinstance(ref, str) or not ref.startswith("#/"):
            return schema
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part, {}) if isinstance(target, dict) else {}
        schema = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
    return schema


def _instance(schema: Any, root: dict[str, Any], rng: np.random.Generator, depth: int = 0) -> Any:
    """A random value valid against common pydantic JSON Schemas (best effort)."""
    if not isinstance(schema, dict) or depth > 8:
        return None
    schema = _resolve(schema, root)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][int(rng.integers(len(schema["enum"])))]
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            options = [o for o in schema[key] if _resolve(o, root).get("type") != "null"] or schema[key]
            return _instance(options[int(rng.integers(len(options)))], root, rng, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or "properties" in schema:
        properties = schema.get("properties") or {}
        required = schema.get("required") or []
        return {name: _instance(properties.get(name, {}), root, rng, depth + 1) for name in required}
    if kind == "string":
        low = int(schema.get("minLength", 1))
        high = max(low, min(int(schema.get("maxLength", low + 16)), low + 16))
        length = int(rng.integers(low, high + 1))
        return "".join(_SAMPLE_LETTERS[int(i)] for i in rng.integers(len(_SAMPLE_LETTERS), size=length))
    if kind == "integer":
        low = int(schema.get("minimum", schema.get("exclusiveMinimum", -1) + 1))
        high = int(schema.get("maximum", schema.get("exclusiveMaximum", low + 101) - 1))
        return int(rng.integers(low, max(low, high) + 1))
    if kind == "number":
        start = float(schema.get("minimum", 0.0))
        return float(rng.uniform(start, float(schema.get("maximum", start + 100.0))))
    if kind == "boolean":
        return bool(rng.integers(2))
    if kind == "array":
        return [_instance(schema.get("items", {}), root, rng, depth + 1) for _ in range(int(schema.get("minItems", 0)))]
    return None


def _resolve_grader(grader: Any, client: Any) -> Any:
    """The grader to use: `grader` (loaded when a reference), else the served folder's, if any."""
    if grader is False:
        return None
    if isinstance(grader, (str, Path)):
        return load_grader(grader)
    if grader is not None:
        return grader
    env_dir = getattr(getattr(client, "provider", None), "env_dir", None)
    if env_dir is None:
        return None
    return load_grader(env_dir) if load_manifest(Path(env_dir)).grader else None


class GymEnv(gymnasium.Env[str, str]):
    """A Gymnasium environment over a sync client (`EnvClient` or `GenericEnvClient`).

    Example:
        >>> env = GymEnv(GenericEnvClient(env_dir="environments/echo"))  # doctest: +SKIP
        >>> obs, info = env.reset(seed=0)
        >>> obs, reward, terminated, truncated, info = env.step('{"message": "hi"}')

    `reset(seed=..., options={...})` passes the seed and the options (task fields) to the
    server's `reset`. `step` returns the observation's JSON, its reward, `terminated` = the
    observation's `done`, and `truncated` = whether `max_steps` steps were taken without it.
    `info` holds the observation's `metadata` and the server's `reward` as sent.

    The reward of a step is the environment's (`None` counts as 0.0), except on the episode's
    last step (terminated or truncated) when there is a grader: the grader's reward for the
    episode, which is what a host-graded environment (Wordle, the coding environments) gives
    and the server never sends; `info["score"]` then holds its `Score` (value, components,
    evidence) and `info["env_reward"]` the environment's reward of that step. The grader is
    `grader=` (a `Grader`, a rubric, a reward function, or a reference `load_grader` takes:
    an environment folder or `module:Name`); by default, the one the folder's `openenv.yaml`
    names when the client serves a folder (`GenericEnvClient(env_dir=...)`), else none.
    `grader=False` never grades. With `step_rewards=False`, steps before the last give 0.0
    (for a grader that already counts the environment's rewards). Truncate with `max_steps`
    rather than `gymnasium.wrappers.TimeLimit`, which ends episodes without grading them
    (or call `grade()` yourself).

    An action that is not JSON or fails the action schema is, by default, data rather than a
    crash (`invalid_action="observe"`): the step returns the previous observation, the reward
    `invalid_action_reward`, and `info["error"]` saying why; the episode goes on.
    `invalid_action="raise"` raises `InvalidActionError` instead.
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(
        self,
        client: EnvClient[Any, Any, Any],
        *,
        max_length: int = DEFAULT_MAX_LENGTH,
        invalid_action: Literal["observe", "raise"] = "observe",
        invalid_action_reward: float = 0.0,
        close_client: bool = True,
        grader: Any = None,
        max_steps: int | None = None,
        step_rewards: bool = True,
    ) -> None:
        """Wrap a client; fetches the server's `/schema` for the action space.

        Args:
            client: a sync client (typed or generic) of the environment's server.
            max_length: the longest observation or action JSON, in characters.
            invalid_action: `"observe"` (a bad action is a step with `info["error"]`) or `"raise"`.
            invalid_action_reward: the reward of a step whose action was invalid.
            close_client: `close()` also closes the client.
            grader: grades the episode at its last step (see the class docstring); None: the
                served folder's, if any; False: none.
            max_steps: the most steps of an episode; the last is `truncated` (and graded).
            step_rewards: False gives 0.0 on every step but the last (graded) one.
        """
        if invalid_action not in ("observe", "raise"):
            raise ValueError(f"invalid_action must be 'observe' or 'raise', got {invalid_action!r}")
        if max_steps is not None and max_steps < 1:
            raise ValueError(f"max_steps must be at least 1, got {max_steps}")
        self.grader = _resolve_grader(grader, client)
        self.max_steps = max_steps
        self.step_rewards = step_rewards
        self._steps = 0
        self.client = client
        schema = client.schema()
        self.action_space = JsonText(max_length, schema=schema.action, tools=schema.tools)
        self.observation_space = JsonText(max_length)
        self._max_length = max_length
        self.invalid_action = invalid_action
        self.invalid_action_reward = float(invalid_action_reward)
        self._close_client = close_client
        self._last_observation: str | None = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        task = dict(options or {})
        if seed is not None:
            task["seed"] = seed
        result = self.client.reset(**task)
        self._steps = 0
        self._last_observation = self._text(result.observation)
        return self._last_observation, {"metadata": dict(result.metadata), "reward": result.reward}

    def step(self, action: str | Mapping[str, Any]) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self._last_observation is None:
            raise gymnasium.error.ResetNeeded("Call reset() before step()")
        try:
            payload = json.loads(action) if isinstance(action, str) else dict(action)
        except (ValueError, TypeError) as e:
            return self._invalid(InvalidActionError(f"The action is not JSON: {e}", code="VALIDATION_ERROR"))
        if not isinstance(payload, dict):
            message = f"An action is a JSON object, got {type(payload).__name__}"
            return self._invalid(InvalidActionError(message, code="VALIDATION_ERROR"))
        try:
            result = self.client.step(payload)
        except InvalidActionError as e:
            return self._invalid(e)
        self._last_observation = self._text(result.observation)
        self._steps += 1
        env_reward = 0.0 if result.reward is None else float(result.reward)
        terminated = bool(result.done)
        truncated = not terminated and self.max_steps is not None and self._steps >= self.max_steps
        info: dict[str, Any] = {"metadata": dict(result.metadata), "reward": result.reward}
        reward = env_reward if self.step_rewards else 0.0
        if (terminated or truncated) and self.grader is not None:
            score = self.grade()
            reward = score.value
            info["score"], info["env_reward"] = score, env_reward
        return self._last_observation, reward, terminated, truncated, info

    def grade(self) -> Score:
        """The grader's score for the current episode (`step` calls it at the episode's end).

        Raises:
            ValueError: this `GymEnv` has no grader.
        """
        if self.grader is None:
            raise ValueError("this GymEnv has no grader: pass grader= (an environment folder or module:Name)")
        return grade(self.grader, self.client)

    def _invalid(self, error: InvalidActionError) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self.invalid_action == "raise":
            raise error
        assert self._last_observation is not None
        return self._last_observation, self.invalid_action_reward, False, False, {"error": error.args[0]}

    def close(self) -> None:
        if self._close_client:
            self.client.close()
        super().close()

    def _text(self, observation: Any) -> str:
        if hasattr(observation, "model_dump"):
            observation = observation.model_dump(mode="json", exclude={"reward", "done"})
        text = json.dumps(observation, ensure_ascii=True, sort_keys=True)
        if len(text) > self._max_length:
            raise ValueError(
                f"The observation's JSON is {len(text)} characters, more than the observation space's "
                f"max_length ({self._max_length}): pass a larger max_length to GymEnv"
            )
        return text
