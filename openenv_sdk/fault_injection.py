"""Fault injection: an environment, a judge and a plan that make episodes fail on purpose, so that
a consumer (a trainer, `openenv eval`) can be tested to honour failures (docs/failures.md).

    plan = fault_plan(500, seed=0)                     # 5 % reset, 10 % sandbox, 10 % judge faults
    with serve_app(judge_app()) as judge_url, serve_app(create_app(FaultyEnvironment)) as env_url:
        grader = faulty_grader(judge_url)
        ...                                            # reset with plan[i].reset_kwargs, play, grade

Every fault is a real one: `reset` raises in the environment's `reset`; `sandbox` kills the
episode's sandbox (bubblewrap, `Sandbox.kill_all`) from another thread while the grader's check
runs in it; `judge` makes the judge, a real HTTP server, answer HTTP 500. A policy can also time
out by its own doing: `run` with a command past `RUN_TIMEOUT_S`, which scores 0 as any episode
with no answer does.

The task: answer the `target` word with the `answer` tool. The reward is 0.5 for the right word
(the check reads the answer file in the sandbox) plus 0.5 for the judge's approval of an answer
(any answer), so a right answer scores 1.0, a wrong one 0.5 and none 0.0.
"""

from __future__ import annotations

import collections
import inspect
import os
import random
import threading
from collections.abc import Sequence
from typing import Any, Literal

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict

from .environment import Environment
from .judge import JudgeRubric
from .rubric import FunctionRubric, Rubric, WeightedSum
from .sandbox import Sandbox
from .tools import orchestrator, tool
from .types import Action, Observation, State

__all__ = [
    "CHECK_S",
    "KILL_AFTER_S",
    "RUN_TIMEOUT_S",
    "Fault",
    "FaultyEnvironment",
    "PlannedFault",
    "fault_plan",
    "FaultyGrader",
    "faulty_grader",
    "judge_app",
]

Fault = Literal["none", "reset", "sandbox", "judge"]
Behaviour = Literal["right", "wrong", "timeout"]
RUN_TIMEOUT_S = 0.2
"""The limit of the `run` tool's commands: past it, the policy's own timeout."""
CHECK_S = 0.1
"""How long the grader's check runs in the sandbox (a `sleep` before reading the answer)."""
KILL_AFTER_S = 0.03
"""When a `sandbox` fault kills the sandbox, after the check started."""
WORDS = ("apple", "river", "stone", "cloud", "ember", "frost", "grove", "lumen")


class PlannedFault(BaseModel):
    """One episode of a plan: its task (the reset arguments) and what the policy does."""

    model_config = ConfigDict(frozen=True)

    index: int
    group: int
    fault: Fault
    behaviour: Behaviour
    target: str

    @property
    def reset_kwargs(self) -> dict[str, Any]:
        return {"target": self.target, "fault": self.fault}

    @property
    def expected_reward(self) -> float | None:
        """The reward a consumer must see; None for a failure (no reward)."""
        if self.fault != "none":
            return None
        return {"right": 1.0, "wrong": 0.5, "timeout": 0.0}[self.behaviour]


def fault_plan(
    episodes: int,
    *,
    group_size: int = 4,
    reset: float = 0.05,
    sandbox: float = 0.10,
    judge: float = 0.10,
    seed: int = 0,
) -> list[PlannedFault]:
    """`episodes` episodes in groups of `group_size` (one target per group), with exactly
    round(rate * episodes) of each fault, shuffled with `seed`; behaviours cycle right, wrong,
    right, timeout, so a group's rewards vary.

    Raises:
        ValueError: rates that do not fit in [0, 1] together, or a group size below 1.
    """
    if group_size < 1 or episodes < 0:
        raise ValueError(f"episodes must be >= 0 and group_size >= 1, got {episodes}, {group_size}")
    counts = {"reset": round(reset * episodes), "sandbox": round(sandbox * episodes), "judge": round(judge * episodes)}
    if min(reset, sandbox, judge) < 0 or sum(counts.values()) > episodes:
        raise ValueError(f"fault rates must be >= 0 and sum to at most 1, got {reset}, {sandbox}, {judge}")
    faults: list[Fault] = [f for f, n in counts.items() for _ in range(n)]  # type: ignore[misc]
    faults += ["none"] * (episodes - len(faults))
    random.Random(seed).shuffle(faults)
    behaviours: Sequence[Behaviour] = ("right", "wrong", "right", "timeout")
    return [
        PlannedFault(
            index=i,
            group=i // group_size,
            fault=faults[i],
            behaviour=behaviours[(i + i // group_size) % len(behaviours)],
            target=WORDS[(i // group_size) % len(WORDS)],
        )
        for i in range(episodes)
    ]


class FaultyAction(Action):
    """The answer, for an orchestrator that steps instead of calling tools."""

    text: str


class FaultyObservation(Observation):
    text: str = ""


class FaultyState(State):
    target: str = ""
    fault: str = "none"
    answer: str = ""


class FaultyEnvironment(Environment[FaultyAction, FaultyObservation, FaultyState]):
    """Answer the target word; faults as the reset arguments say (see the module docstring), or,
    with `fault="scheduled"`, the next of `schedule(...)`'s (for consumers whose episodes of one
    group share their reset arguments, as GRPO's do)."""

    name = "faulty"
    version = "0.1.0"
    _scheduled: collections.deque[str] = collections.deque()
    _lock = threading.Lock()

    @classmethod
    def schedule(cls, faults: Sequence[str]) -> None:
        """The faults of the next resets with `fault="scheduled"`, in order (then none)."""
        with cls._lock:
            cls._scheduled = collections.deque(faults)

    @classmethod
    def scheduled_left(cls) -> int:
        with cls._lock:
            return len(cls._scheduled)

    def __init__(self) -> None:
        super().__init__()
        self._sandbox: Sandbox | None = None

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, target: str = "apple", fault: str = "none", **task: Any
    ) -> FaultyObservation:
        if fault == "scheduled":
            with self._lock:
                fault = self._scheduled.popleft() if self._scheduled else "none"
        if fault == "reset":
            raise RuntimeError("injected fault: the environment could not be reset")
        if self._sandbox is None:
            self._sandbox = Sandbox()
        self.state = FaultyState(episode_id=episode_id or f"faulty-{seed}", target=target, fault=fault)
        return FaultyObservation(text=f"Answer the word {target!r} with the answer tool.")

    def step(self, action: FaultyAction) -> FaultyObservation:
        return FaultyObservation(text=self.answer(action.text))

    @tool
    def answer(self, text: str) -> str:
        """Give the answer.

        Args:
            text: the word.
        """
        self.state.answer = text
        assert self._sandbox is not None
        (self._sandbox.workspace / "answer.txt").write_text(text, encoding="utf-8")
        return "noted"

    @tool
    def run(self, command: str) -> str:
        """Run a shell command in the sandbox (stopped after RUN_TIMEOUT_S seconds).

        Args:
            command: the command line.
        """
        assert self._sandbox is not None
        result = self._sandbox.run(command, timeout_s=RUN_TIMEOUT_S)
        if result.timed_out:
            return f"the command ran past {RUN_TIMEOUT_S:g} s and was stopped"
        return result.stdout + result.stderr

    @orchestrator
    def check(self) -> dict[str, Any]:
        """What the answer file holds, read in the sandbox; a `sandbox` fault kills it meanwhile."""
        sandbox = self._sandbox
        if sandbox is None:
            raise ValueError("no episode to check: call reset first")
        if self.state.fault != "sandbox":
            result = sandbox.run(f"sleep {CHECK_S}; cat answer.txt 2>/dev/null", timeout_s=60.0)
            return {"stdout": result.stdout, "exit_code": result.exit_code}
        # The host kills the sandbox while the check runs; again every half second until the
        # check is over, so that a kill lands inside the run however late the machine starts it.
        stop = threading.Event()

        def kill() -> None:
            wait_s = KILL_AFTER_S
            while not stop.wait(wait_s):
                sandbox.kill_all()
                wait_s = 0.5

        killer = threading.Thread(target=kill, name="fault-kill", daemon=True)
        killer.start()
        try:
            result = sandbox.run("sleep 30; cat answer.txt 2>/dev/null", timeout_s=60.0)
        finally:
            stop.set()
            killer.join(timeout=10)
        return {"stdout": result.stdout, "exit_code": result.exit_code}

    def close(self) -> None:
        if self._sandbox is not None:
            self._sandbox.close()
            self._sandbox = None


async def _right_word(state: dict[str, Any], env: Any) -> float:
    checked = env.call("check")  # an async client's call is awaited; a sync one's has answered
    if inspect.isawaitable(checked):
        checked = await checked
    return float(bool(state["target"]) and checked["stdout"].strip() == state["target"])


class FaultyGrader(WeightedSum):
    """The grader of `FaultyEnvironment`: 0.5 for the right word (checked in the sandbox) and 0.5
    for the judge's approval (the judge at `judge_url`, an OpenAI-compatible API root; default
    `$OPENENV_FAULT_JUDGE_URL`, so that `openenv_sdk.fault_injection:FaultyGrader` is a grader
    reference)."""

    def __init__(self, judge_url: str | None = None, *, max_retries: int = 1) -> None:
        url = judge_url or os.environ.get("OPENENV_FAULT_JUDGE_URL")
        if not url:
            raise ValueError("pass judge_url or set OPENENV_FAULT_JUDGE_URL to the fault judge's API root (http://HOST:PORT/v1)")
        judge = JudgeRubric(
            base_url=url,
            model="fault-judge",
            prompt="The episode's state: {state}. SCORE 1 if an answer was given.",
            max_retries=max_retries,
            backoff_s=0.01,
            timeout_s=10.0,
            cache=False,
        )
        super().__init__({"right_word": (FunctionRubric(_right_word), 0.5), "judge": (judge, 0.5)}, name="faulty")


def faulty_grader(judge_url: str, *, max_retries: int = 1) -> Rubric:
    """`FaultyGrader(judge_url)`."""
    return FaultyGrader(judge_url, max_retries=max_retries)


def judge_app() -> Any:
    """A judge (FastAPI app, OpenAI chat completions): HTTP 500 for an episode whose state says
    `fault: judge`; otherwise `SCORE: 1` when an answer was given, `SCORE: 0` when not."""
    app = FastAPI()
    app.state.requests = 0

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> JSONResponse:
        app.state.requests += 1
        body = await request.json()
        prompt = body["messages"][-1]["content"]
        if '"fault": "judge"' in prompt:
            return JSONResponse({"error": {"message": "injected fault: the judge failed"}}, status_code=500)
        answered = '"answer": ""' not in prompt
        content = f"SCORE: {int(answered)}"
        return JSONResponse({"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]})

    return app
