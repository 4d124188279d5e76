"""Host-side reward: rubrics that grade an episode outside the container.

A rubric runs in the client or trainer process, over what the orchestrator saw (the task,
actions, observations, the final state) and what it can ask the environment through
orchestrator-only calls (`@orchestrator` methods: run a check in the sandbox, read a file).
Nothing an agent reaches through MCP returns a reward, and the grader's code and hidden data
never enter the container unless a call carries them there at grading time.

Write a grader as a class with tagged methods (parameters are filled by name):

    class WordleGrader(Grader):
        @reward(weight=1.0)
        def solved(self, state) -> bool:
            return state["solved"]

        @reward(weight=0.1)
        def speed(self, state) -> float:
            return 1 - state["guesses_used"] / 6

    score = grade(WordleGrader(), client)   # or: await agrade(WordleGrader(), async_client)

Names a reward function may ask for: `episode` (the client's trajectory), `task` (the reset
arguments), `actions`, `observations`, `rewards` (the environment's own per-step rewards),
`state` (the final state, fetched once), `transcript` (the agent's tool calls, fetched once),
and `env` (the client: `env.call("name", ...)` reaches orchestrator-only calls).

Rubrics compose: `WeightedSum`, `Gate`, `Sequence`, and `EnvReward` (the environment's own
reward, passed through).
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import math
import threading
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from pydantic import BaseModel, Field

from . import tracing
from .errors import EpisodeFailed
from .failures import classify

__all__ = [
    "EnvReward",
    "FunctionRubric",
    "Gate",
    "Grader",
    "Rubric",
    "Score",
    "Sequence",
    "WeightedSum",
    "agrade",
    "grade",
    "reward",
]

_REWARD_TAG = "__openenv_reward__"


class Score(BaseModel):
    """A grader's verdict: the reward, its parts, and the evidence behind it (for debugging)."""

    value: float = Field(description="The reward.")
    components: dict[str, float] = Field(default_factory=dict, description="Each named part's value.")
    evidence: dict[str, Any] = Field(default_factory=dict, description="What each part saw (tests passed, ...).")


class GradingContext:
    """What reward functions can ask for, by parameter name; remote values are fetched once."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self._cache: dict[str, Any] = {}

    async def resolve(self, name: str) -> Any:
        if name in self._cache:
            return self._cache[name]
        trajectory = getattr(self.client, "trajectory", None)
        if name == "env":
            value: Any = self.client
        elif name == "episode":
            value = trajectory
        elif name in ("task", "actions", "observations", "rewards"):
            value = getattr(trajectory, name) if trajectory is not None else None
        elif name == "state":
            value = await _maybe_await(self.client.state())
            if isinstance(value, BaseModel):
                value = value.model_dump(mode="json")
        elif name == "transcript":
            value = await _maybe_await(self.client.call("transcript"))
        else:
            raise TypeError(
                f"reward functions take parameters named episode, task, actions, observations, rewards, "
                f"state, transcript or env; got {name!r}"
            )
        self._cache[name] = value
        return value


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


class Rubric:
    """Base of every rubric: `ascore(context) -> Score`."""

    name: str = "rubric"

    async def ascore(self, ctx: GradingContext) -> Score:
        raise NotImplementedError


def _as_score(value: Any, name: str) -> Score:
    if isinstance(value, Score):
        return value
    evidence: dict[str, Any] = {}
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], Mapping):
        value, evidence = value[0], dict(value[1])
    if isinstance(value, bool | int | float) and math.isfinite(float(value)):
        return Score(value=float(value), evidence=evidence)
    raise TypeError(
        f"reward {name!r} returned {value!r}: return a finite number or bool, (number, evidence_dict), or a Score"
    )


class FunctionRubric(Rubric):
    """A rubric made from one function; its parameters are filled by name from the context."""

    def __init__(self, fn: Callable[..., Any], *, name: str | None = None) -> None:
        self.fn = fn
        self.name = name or str(getattr(fn, "__name__", "reward"))
        self.params = [p for p in inspect.signature(fn).parameters if p != "self"]

    async def ascore(self, ctx: GradingContext) -> Score:
        kwargs = {p: await ctx.resolve(p) for p in self.params}
        value = self.fn(**kwargs)
        if inspect.isawaitable(value):
            value = await value
        return _as_score(value, self.name)


class WeightedSum(Rubric):
    """`sum(weight * part)` over named parts: `WeightedSum({"solved": (r1, 1.0), "speed": (r2, 0.1)})`."""

    def __init__(self, parts: Mapping[str, tuple[Rubric, float]], *, name: str = "weighted_sum") -> None:
        if not parts:
            raise ValueError("WeightedSum needs at least one part")
        self.parts = dict(parts)
        self.name = name

    async def ascore(self, ctx: GradingContext) -> Score:
        total = 0.0
        components: dict[str, float] = {}
        evidence: dict[str, Any] = {}
        for key, (rubric, weight) in self.parts.items():
            part = await rubric.ascore(ctx)
            total += weight * part.value
            components[key] = part.value
            components.update({f"{key}.{k}": v for k, v in part.components.items()})
            if part.evidence:
                evidence[key] = part.evidence
        return Score(value=total, components=components, evidence=evidence)


class Gate(Rubric):
    """`then` counts only when `gate` reaches `threshold`; otherwise the score is `otherwise`.

    E.g. no credit for style unless the tests pass: `Gate(tests_pass, style)`.
    """

    def __init__(self, gate: Rubric, then: Rubric, *, threshold: float = 1.0, otherwise: float = 0.0) -> None:
        self.gate, self.then, self.threshold, self.otherwise = gate, then, threshold, otherwise
        self.name = f"gate({gate.name})"

    async def ascore(self, ctx: GradingContext) -> Score:
        gate = await self.gate.ascore(ctx)
        components = {self.gate.name: gate.value}
        if gate.value < self.threshold:
            return Score(value=self.otherwise, components=components, evidence={"gate": gate.evidence, "passed": False})
        then = await self.then.ascore(ctx)
        components[self.then.name] = then.value
        return Score(value=then.value, components=components, evidence={"gate": gate.evidence, "then": then.evidence})


class Sequence(Rubric):
    """Stages in order; grading stops at the first stage below `threshold`.

    The value is the fraction of stages passed, so partial progress earns partial credit
    (e.g. compiles, then unit tests, then integration tests).
    """

    def __init__(self, stages: list[Rubric], *, threshold: float = 1.0, name: str = "sequence") -> None:
        if not stages:
            raise ValueError("Sequence needs at least one stage")
        self.stages, self.threshold, self.name = stages, threshold, name

    async def ascore(self, ctx: GradingContext) -> Score:
        components: dict[str, float] = {}
        evidence: dict[str, Any] = {}
        passed = 0
        for stage in self.stages:
            result = await stage.ascore(ctx)
            components[stage.name] = result.value
            if result.evidence:
                evidence[stage.name] = result.evidence
            if result.value < self.threshold:
                break
            passed += 1
        return Score(value=passed / len(self.stages), components=components, evidence=evidence)


class EnvReward(Rubric):
    """The environment's own per-step rewards, passed through (summed, or the last one)."""

    def __init__(self, *, reduce: str = "sum") -> None:
        if reduce not in ("sum", "last"):
            raise ValueError("reduce must be 'sum' or 'last'")
        self.reduce = reduce
        self.name = "env_reward"

    async def ascore(self, ctx: GradingContext) -> Score:
        rewards = [float(r) for r in (await ctx.resolve("rewards") or []) if r is not None]
        if not rewards:
            return Score(value=0.0)
        return Score(value=sum(rewards) if self.reduce == "sum" else rewards[-1])


def reward(fn: Callable[..., Any] | None = None, *, weight: float = 1.0, name: str | None = None) -> Any:
    """Tag a `Grader` method as one weighted part of its reward. Returns the function unchanged."""

    def mark(f: Callable[..., Any]) -> Callable[..., Any]:
        setattr(f, _REWARD_TAG, (weight, name or f.__name__))
        return f

    return mark(fn) if fn is not None else mark


class Grader(Rubric):
    """A rubric written as a class: its `@reward(weight=...)` methods, summed with their weights.

    Override `rubric()` to compose differently (e.g. return a `Gate` over the tagged parts,
    found in `self.parts()`).
    """

    name = "grader"

    def parts(self) -> dict[str, tuple[Rubric, float]]:
        found: dict[str, tuple[Rubric, float]] = {}
        for klass in reversed(type(self).__mro__):
            for attr, value in vars(klass).items():
                tag = getattr(value, _REWARD_TAG, None)
                if tag is not None:
                    weight, name = tag
                    found[name] = (FunctionRubric(getattr(self, attr), name=name), weight)
        return found

    def rubric(self) -> Rubric:
        parts = self.parts()
        if not parts:
            raise TypeError(f"{type(self).__name__} has no @reward methods")
        return WeightedSum(parts, name=type(self).__name__)

    async def ascore(self, ctx: GradingContext) -> Score:
        return await self.rubric().ascore(ctx)


def _as_rubric(rubric: Rubric | Callable[..., Any]) -> Rubric:
    return rubric if isinstance(rubric, Rubric) else FunctionRubric(rubric)


async def agrade(rubric: Rubric | Callable[..., Any], client: Any) -> Score:
    """Grade the client's current episode (async clients, or sync ones from async code).

    Raises:
        EpisodeFailed: the grader could not decide (a judge that failed, a sandbox killed while
            the check ran, the server gone, the grader's own code raising): never a reward; its
            `failure.cause` says why (`openenv_sdk.failures`).
        TypeError: the grader breaks the rubric contract (an unknown parameter name, a value
            that is not a finite number): a bug to fix, not an episode's failure.
    """
    rubric = _as_rubric(rubric)
    if not tracing.enabled():
        return await _ascore(rubric, client)
    with tracing.span("openenv.grade", attributes={"openenv.grader": type(rubric).__name__}) as span:
        score = await _ascore(rubric, client)
        tracing.set_attributes(span, {"openenv.reward": score.value})
        return score


async def _ascore(rubric: Rubric, client: Any) -> Score:
    try:
        return await rubric.ascore(GradingContext(client))
    except (EpisodeFailed, TypeError):
        raise  # a TypeError is the grader breaking its contract (a parameter, a return value): fix it, every episode would fail
    except Exception as e:
        raise EpisodeFailed(classify(e, stage="grading")) from e


def grade(rubric: Rubric | Callable[..., Any], client: Any) -> Score:
    """Grade the client's current episode from sync code (also inside Jupyter's running loop)."""
    coro: Awaitable[Score] = agrade(rubric, client)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)  # type: ignore[arg-type]
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["score"] = asyncio.run(coro)  # type: ignore[arg-type]
        except BaseException as e:  # re-raised in the caller's thread
            box["error"] = e

    context = contextvars.copy_context()  # the caller's span, for a traced grade
    thread = threading.Thread(target=context.run, args=(run,), name="openenv-grade")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["score"]
