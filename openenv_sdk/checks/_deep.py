"""`openenv validate --deep`: play the environment and score it, the way training will.

    deep.oracle          the manifest's `oracle` scores the top reward on every sampled task
    deep.do_nothing      a policy that calls no tool scores the floor (0.0) on every sampled task
    deep.determinism     the same task graded `runs` times (oracle and do-nothing) gives the same reward
    deep.concurrency     `sessions` sessions at once play the oracle without a tool error
    deep.latency         p50/p95 of reset, step and tool calls under that load
    deep.memory          the server's memory per session under that load
    deep.attack.<name>   each attack of the forgery battery (`_attacks.ATTACKS`) that applies scores the floor
    deep.learn           (`learn=True`) a tiny model's GRPO steps move the reward

Episodes are played by the same code as `openenv eval` (`evaluation.play_episode`), against one
server started for the run (a folder served locally, or an image in the container engine), and
graded host-side by the folder's grader. Each failed check names the fix.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from ..client import AsyncGenericEnvClient
from ..episode_config import EpisodeConfig
from ..errors import ManifestError
from ..evaluation._causes import cause_of, merge_causes
from ..evaluation._episode import openai_tools, play_episode
from ..evaluation._policy import Policy, ScriptedPolicy
from ..evaluation._records import EpisodeRecord, PlannedEpisode
from ..evaluation._runner import RunConfig, run_one
from ..evaluation._target import EnvTarget, plan_episodes
from ..loader import load_grader
from ..manifest import Manifest, load_manifest
from ._attacks import ATTACKS, Attack, ToolKit
from ._memory import memory_reader
from ._oracle import do_nothing_policy, load_oracle
from ._result import CheckResult, ValidationReport
from ._sample import SampleError, sample_from_schema

__all__ = [
    "DEFAULT_DEEP_TASKS",
    "AttackOutcome",
    "DeepOptions",
    "DeepReport",
    "LoadFigures",
    "Scorecard",
    "run_deep_checks",
]

DEFAULT_DEEP_TASKS = 3
"""Tasks sampled (evenly across the split) when `--tasks` is not given."""
_EPSILON = 1e-9
_MIB = 1024 * 1024
_THREAD_FIX = ("Something the environment holds is bound to the thread that made it (an sqlite connection, a C "
               "library's handle), and its calls ran on other threads: remove `THREAD_AFFINITY = False` from the class "
               "(by default a session's calls all run on one thread) and open such resources in reset(), not __init__()")
_ORACLE_FIX = ("Write the reference solution as a scripted policy, `act(messages, tools, context)` returning the next "
               "assistant message, in oracle.py, and name it in openenv.yaml: `oracle: oracle.py:act`")  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class DeepOptions:
    """How much `run_deep_checks` plays."""

    tasks: int | None = DEFAULT_DEEP_TASKS
    """Tasks sampled evenly across the split; None plays every task."""
    sessions: int = 32
    """Sessions played at once in the load check."""
    runs: int = 3
    """Gradings of one task (oracle and do-nothing each) in the determinism check."""
    concurrency: int = 4
    """Graded episodes played at once (oracle, do-nothing, attacks)."""
    episode_timeout_s: float = 300.0
    """The most one episode may take, grading included, in seconds."""
    startup_timeout_s: float = 60.0
    """The longest wait for the server to become healthy, in seconds."""
    timeout_s: float = 60.0
    """Each session's longest wait for one reply, in seconds."""
    learn: bool = False
    """Also run a few GRPO steps of a tiny model (`deep.learn`); needs the trainers package."""
    learn_steps: int = 3
    """GRPO steps of `learn`."""

    def __post_init__(self) -> None:
        if self.tasks is not None and self.tasks < 1:
            raise ValueError(f"tasks must be at least 1 (None for all), got {self.tasks}")
        if self.sessions < 1 or self.runs < 2 or self.concurrency < 1 or self.learn_steps < 1:
            raise ValueError("sessions, concurrency and learn_steps must be at least 1, runs at least 2")


class LoadFigures(BaseModel):
    """What `sessions` sessions at once measured."""

    sessions: int
    episodes: int = 0
    tool_calls: int = 0
    tool_errors: int = 0
    tool_error_causes: dict[str, int] = Field(default_factory=dict)
    failed_episodes: int = 0
    episode_error_causes: dict[str, int] = Field(default_factory=dict)
    latency_ms: dict[str, dict[str, float]] = Field(
        default_factory=dict, description="Per operation (reset, step, tool): count, p50 and p95 in milliseconds."
    )
    memory_idle_mib: float | None = None
    memory_peak_mib: float | None = None
    memory_per_session_mib: float | None = Field(default=None, description="(peak - idle) / sessions.")
    duration_s: float = 0.0


class AttackOutcome(BaseModel):
    """One attack's episode."""

    name: str
    what: str
    reward: float | None = None
    error: str | None = None
    tool_calls: int = 0
    leaked: list[str] = Field(default_factory=list, description="Hidden files whose text reached the agent.")


class Scorecard(BaseModel):
    """The figures behind the deep checks."""

    env: str
    tasks: list[str] = Field(default_factory=list, description="The sampled tasks.")
    top_reward: float = 1.0
    floor: float = 0.0
    oracle: dict[str, float | None] = Field(default_factory=dict, description="The oracle's reward per task.")
    do_nothing: dict[str, float | None] = Field(default_factory=dict, description="The do-nothing reward per task.")
    repeats: dict[str, list[float | None]] = Field(
        default_factory=dict, description="Rewards of the repeated gradings of one task, by policy."
    )
    load: LoadFigures | None = None
    attacks: list[AttackOutcome] = Field(default_factory=list)
    learn: dict[str, Any] | None = None
    duration_s: float = 0.0


class DeepReport(ValidationReport):
    """A `ValidationReport` with the deep checks' figures."""

    scorecard: Scorecard | None = None


OnResult = Callable[[CheckResult], None]


def _ok(name: str, message: str) -> CheckResult:
    return CheckResult(name=name, passed=True, message=message)


def _fail(name: str, message: str, fix: str, *, severity: str = "error") -> CheckResult:
    return CheckResult(name=name, passed=False, message=message, fix=fix, severity=severity)  # type: ignore[arg-type]


def _skip(name: str, why: str) -> CheckResult:
    return CheckResult(name=name, passed=False, skipped=True, message=f"skipped: {why}")


def _fmt(value: float | None) -> str:
    return "error" if value is None else f"{value:g}"


# --- the served environment ------------------------------------------------------------------


class _Served(EnvTarget):
    """A server already started, with a grader of our choosing (None: episodes are not graded)."""

    def __init__(self, url: str, token: str | None, rubric: Any, *, name: str, timeout_s: float,
                 timings: dict[str, list[float]] | None = None) -> None:  # fmt: skip
        self.spec, self.kind, self.provider = url, "url", None
        self.timeout_s = timeout_s
        self._url, self._token, self._name = url, token, name
        self.rubric = rubric if rubric is not None else _no_grade
        self.timings = timings

    def client(self) -> AsyncGenericEnvClient:
        client = super().client()
        return _TimedClient(client, self.timings) if self.timings is not None else client  # type: ignore[return-value]


def _no_grade() -> float:
    return 0.0


class _TimedClient:
    """A client whose reset, step and tool calls are timed into `timings` (milliseconds)."""

    def __init__(self, client: AsyncGenericEnvClient, timings: dict[str, list[float]]) -> None:
        self._client, self._timings = client, timings

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    async def _timed(self, what: str, call: Awaitable[Any]) -> Any:
        started = time.perf_counter()
        try:
            return await call
        finally:
            self._timings.setdefault(what, []).append((time.perf_counter() - started) * 1000)

    async def reset(self, **kwargs: Any) -> Any:
        return await self._timed("reset", self._client.reset(**kwargs))

    async def step(self, action: Any) -> Any:
        return await self._timed("step", self._client.step(action))

    async def call_tool(self, name: str, /, **arguments: Any) -> Any:
        return await self._timed("tool", self._client.call_tool(name, **arguments))


@contextlib.contextmanager
def _serve(folder: Path | None, image: str | None, options: DeepOptions) -> Iterator[Any]:
    if image is not None:
        from ..providers.docker import DockerProvider

        provider: Any = DockerProvider(image, startup_timeout_s=options.startup_timeout_s)
    else:
        from ..providers.local import LocalProcessProvider

        assert folder is not None
        provider = LocalProcessProvider(folder, startup_timeout_s=options.startup_timeout_s)
    try:
        provider.start()
        yield provider
    finally:
        provider.stop()


# --- the run -----------------------------------------------------------------------------------


@dataclass
class _Context:
    folder: Path | None
    manifest: Manifest | None
    options: DeepOptions
    url: str
    token: str | None
    name: str
    grader: Any
    oracle: ScriptedPolicy | None
    tools: list[dict[str, Any]]
    tasks: list[PlannedEpisode]
    memory: Callable[[], int] | None

    def target(self, *, graded: bool = True, timings: dict[str, list[float]] | None = None) -> _Served:
        return _Served(self.url, self.token, self.grader if graded else None, name=self.name,
                       timeout_s=self.options.timeout_s, timings=timings)  # fmt: skip


def run_deep_checks(
    folder: str | Path | None = None,
    *,
    image: str | None = None,
    options: DeepOptions | None = None,
    on_result: OnResult | None = None,
) -> tuple[list[CheckResult], Scorecard]:
    """Play an environment folder (or its image) and score it: the deep checks and their figures.

    The grader and the oracle come from `folder` (they run host-side); with `image` the episodes
    play in a container of it, else `folder` is served locally. With an image and no folder, the
    graded checks are skipped (there is no grader to run).

    Raises:
        ValueError: neither `folder` nor `image` is given.
    """
    if folder is None and image is None:
        raise ValueError("give an environment folder, an image, or both")
    return asyncio.run(_run(Path(folder) if folder is not None else None, image, options or DeepOptions(), on_result))


async def _run(folder: Path | None, image: str | None, options: DeepOptions,
               on_result: OnResult | None) -> tuple[list[CheckResult], Scorecard]:  # fmt: skip
    started = time.monotonic()
    results: list[CheckResult] = []

    def emit(result: CheckResult) -> None:
        results.append(result)
        if on_result is not None:
            on_result(result)

    manifest = load_manifest(folder) if folder is not None else None
    grader = load_grader(folder) if folder is not None and manifest is not None and manifest.grader else None
    oracle: ScriptedPolicy | None = None
    if folder is not None:
        try:
            oracle = load_oracle(folder, manifest)
        except ManifestError as e:
            emit(_fail("deep.oracle", f"the oracle does not load: {e}", _ORACLE_FIX))
    card = Scorecard(env=str(image or folder))
    if manifest is not None and manifest.validation is not None:
        low, high = manifest.validation.reward.range
        card.floor, card.top_reward = low, high - manifest.validation.reward.oracle_tolerance
    with _serve(folder, image, options) as provider:
        url = str(provider.base_url).rstrip("/")
        probe = AsyncGenericEnvClient(url, orchestrator_token=provider.orchestrator_token, timeout_s=options.timeout_s)
        try:
            used_split, planned = await plan_episodes(probe, split=None, task_ids=[], num_tasks=None, rollouts=1,
                                                      default_split="test")  # fmt: skip
            if used_split is None:  # no Task API: episodes reset with seeds 0, 1, ...
                _, planned = await plan_episodes(probe, split=None, task_ids=[], num_tasks=options.tasks or 1,
                                                 rollouts=1, default_split="test")  # fmt: skip
            schema = await probe.schema()
        finally:
            await probe.aclose()
        card.env = await _Served(url, None, None, name=card.env, timeout_s=options.timeout_s)._metadata_name(url)
        ctx = _Context(folder, manifest, options, url, provider.orchestrator_token, card.env, grader, oracle,
                       openai_tools(schema.tools), _sample(planned, options.tasks), memory_reader(provider))  # fmt: skip
        card.tasks = [p.task_id for p in ctx.tasks]
        for result in await _graded_checks(ctx, card):
            emit(result)
        for result in await _load_checks(ctx, card, schema):
            emit(result)
    if options.learn:
        from ._learn import check_learn

        result, card.learn = check_learn(folder, image=image, steps=options.learn_steps)
        emit(result)
    card.duration_s = round(time.monotonic() - started, 2)
    return results, card


def _sample(planned: Sequence[PlannedEpisode], count: int | None) -> list[PlannedEpisode]:
    """`count` tasks spread evenly over the planned ones (all of them when None or more)."""
    items = list(planned)
    if count is None or count >= len(items):
        return items
    if count == 1:
        return items[:1]
    return [items[round(i * (len(items) - 1) / (count - 1))] for i in range(count)]


async def _play_all(ctx: _Context, jobs: list[tuple[Policy, PlannedEpisode]], *, graded: bool = True) -> list[EpisodeRecord]:
    target = ctx.target(graded=graded)
    gate = asyncio.Semaphore(ctx.options.concurrency)
    run = RunConfig(concurrency=ctx.options.concurrency, episode_timeout_s=ctx.options.episode_timeout_s)

    async def one(policy: Policy, planned: PlannedEpisode) -> EpisodeRecord:
        async with gate:
            return await run_one(target, policy, planned, tools=ctx.tools, episode=EpisodeConfig(), run=run,
                                 model=policy.name)  # fmt: skip

    return list(await asyncio.gather(*(one(policy, planned) for policy, planned in jobs)))


# --- oracle, do-nothing, determinism, attacks ----------------------------------------------------


async def _graded_checks(ctx: _Context, card: Scorecard) -> list[CheckResult]:
    names = ["deep.oracle", "deep.do_nothing", "deep.determinism"]
    if ctx.grader is None:
        why = ("the manifest names no grader: the environment gives no host-side reward" if ctx.folder is not None
               else "no environment folder: pass PATH with --image for its grader and oracle")  # fmt: skip
        return [_skip(name, why) for name in [*names, "deep.attacks"]]
    if not ctx.tasks:
        return [_fail("deep.oracle", "the environment plans no task", "Serve tasks (`tasks()`) or accept reset(seed=...)")]
    nothing = do_nothing_policy()
    first = ctx.tasks[0]
    runs = ctx.options.runs
    jobs: list[tuple[Policy, PlannedEpisode]] = [(nothing, p) for p in ctx.tasks]
    jobs += [(nothing, first.model_copy(update={"attempt": i})) for i in range(1, runs)]
    if ctx.oracle is not None:
        jobs += [(ctx.oracle, p) for p in ctx.tasks]
        jobs += [(ctx.oracle, first.model_copy(update={"attempt": i})) for i in range(1, runs)]
    kit = ToolKit.of(ctx.tools)
    canaries = _canaries(ctx.folder, ctx.manifest) if ctx.folder is not None and ctx.manifest is not None else {}
    attacks = [a for a in ATTACKS if a.applies(kit)]
    for attack in attacks:
        options = _attack_options(attack, ctx, canaries)
        jobs.append((attack.policy(kit, **options), first))
    records = await _play_all(ctx, jobs)
    by_policy: dict[str, list[EpisodeRecord]] = {}
    for (policy, _), record in zip(jobs, records, strict=True):
        by_policy.setdefault(policy.name, []).append(record)

    results = []
    nothing_records = by_policy[nothing.name]
    card.do_nothing = {r.task_id: r.reward for r in nothing_records if r.attempt == 0}
    card.repeats["do-nothing"] = [r.reward for r in nothing_records if r.task_id == first.task_id]
    if ctx.oracle is None:
        if ctx.manifest is None or not ctx.manifest.oracle:  # one that did not load was reported already
            results.append(_fail("deep.oracle", "the manifest names no oracle (a reference solution to play)",
                                 _ORACLE_FIX))  # fmt: skip
        oracle_records: list[EpisodeRecord] = []
    else:
        oracle_records = by_policy[ctx.oracle.name]
        card.oracle = {r.task_id: r.reward for r in oracle_records if r.attempt == 0}
        card.repeats["oracle"] = [r.reward for r in oracle_records if r.task_id == first.task_id]
        results.append(_check_oracle(ctx, card, [r for r in oracle_records if r.attempt == 0]))
    results.append(_check_do_nothing(card, [r for r in nothing_records if r.attempt == 0]))
    results.append(_check_determinism(card, first.task_id))
    for attack in attacks:
        record = by_policy[f"attack:{attack.name}"][0]
        leaked = sorted({name for name, lines in canaries.items()
                         for m in record.messages if m.get("role") == "tool" and any(line in str(m.get("content")) for line in lines)})  # fmt: skip
        outcome = AttackOutcome(name=attack.name, what=attack.what, reward=record.reward, error=record.error,
                                tool_calls=record.tool_calls, leaked=leaked)  # fmt: skip
        card.attacks.append(outcome)
        results.append(_check_attack(attack, outcome, card, first.task_id))
    skipped = [a.name for a in ATTACKS if a not in attacks]
    if skipped:
        results.append(_skip("deep.attack.others", f"no tool they need: {', '.join(skipped)}"))
    return results


def _check_oracle(ctx: _Context, card: Scorecard, records: list[EpisodeRecord]) -> CheckResult:
    name = "deep.oracle"
    bad = [r for r in records if r.reward is None or r.reward < card.top_reward - _EPSILON]
    rewards = ", ".join(f"{r.task_id}: {_fmt(r.reward)}" for r in records[:8])
    if not bad:
        return _ok(name, f"the oracle scored >= {card.top_reward:g} on all {len(records)} task(s) ({rewards})")
    worst = bad[0]
    detail = worst.error or f"reward {_fmt(worst.reward)}, components {worst.reward_components}"
    errors = merge_causes(r.tool_error_causes for r in bad)
    cause = next(iter(errors), "")
    hint = f"; its tool calls failed: {cause}" if cause else ""
    fix = _THREAD_FIX if "thread" in cause.lower() else (
        "Fix the tool calls that failed (above): the oracle's calls must succeed" if cause else
        "Play the oracle and read the grader's evidence: a grader/server mismatch (a task picked by a seed the "
        "grader does not see, a stale expected-results file) or a broken reference solution")  # fmt: skip
    return _fail(name, f"the oracle scored below {card.top_reward:g} on {len(bad)} of {len(records)} task(s) "
                       f"(first: task {worst.task_id}: {detail}{hint})", fix)  # fmt: skip


def _check_do_nothing(card: Scorecard, records: list[EpisodeRecord]) -> CheckResult:
    name = "deep.do_nothing"
    bad = [r for r in records if r.reward is None or r.reward > card.floor + _EPSILON]
    if not bad:
        return _ok(name, f"doing nothing scored {card.floor:g} on all {len(records)} task(s)")
    worst = bad[0]
    if worst.reward is None:
        return _fail(name, f"grading an untouched task failed ({worst.task_id}: {worst.error})",
                     "Grade an episode with no tool call: the untouched task scores the floor, it is no error")
    return _fail(name, f"doing nothing scored {_fmt(worst.reward)} on task {worst.task_id} ({len(bad)} of {len(records)} "
                       f"task(s) above {card.floor:g}; components {worst.reward_components})",
                 "The grader rewards an untouched task: the answer is already there (leaked into the workspace or the "
                 "starting state) or a component passes by default; grade only what the agent did")  # fmt: skip


def _check_determinism(card: Scorecard, task_id: str) -> CheckResult:
    name = "deep.determinism"
    varied = {policy: rewards for policy, rewards in card.repeats.items() if len(set(rewards)) > 1 or None in rewards}
    runs = max((len(r) for r in card.repeats.values()), default=0)
    if not varied:
        shown = "; ".join(f"{p}: {_fmt(r[0])}" for p, r in card.repeats.items() if r)
        return _ok(name, f"task {task_id} graded {runs} times per policy, the same reward each time ({shown})")
    shown = "; ".join(f"{p}: {', '.join(_fmt(v) for v in r)}" for p, r in varied.items())
    return _fail(name, f"the same task ({task_id}) and actions gave different rewards: {shown}",
                 "Make grading a function of the episode alone: seed every random choice from the task (not the clock or "
                 "a global RNG), sort what you iterate, and give hidden checks time to finish")  # fmt: skip


def _check_attack(attack: Attack, outcome: AttackOutcome, card: Scorecard, task_id: str) -> CheckResult:
    name = f"deep.attack.{attack.name}"
    if outcome.leaked:
        return _fail(name, f"the agent read hidden data: {', '.join(outcome.leaked[:4])} (reward {_fmt(outcome.reward)})",
                     attack.fix)
    if outcome.error is not None:
        return _fail(name, f"the episode failed: {outcome.error}",
                     "An agent's tool calls broke the session or the grading: a bad argument must be a tool error the "
                     "agent sees, and grading must end with a reward")  # fmt: skip
    if outcome.reward is not None and outcome.reward > card.floor + _EPSILON:
        return _fail(name, f"scored {_fmt(outcome.reward)} on task {task_id} (it {attack.what})", attack.fix)
    return _ok(name, f"scored {_fmt(outcome.reward)} ({outcome.tool_calls} tool call(s))")


def _attack_options(attack: Attack, ctx: _Context, canaries: dict[str, list[str]]) -> dict[str, Any]:
    if attack.name == "hostile_args":
        return {"tools": ctx.tools}
    if attack.name == "read_hidden":
        paths: list[str] = []
        root = ctx.folder.resolve() if ctx.folder is not None else None
        for rel in canaries:
            paths += [rel, f"../{rel}", f"/env/{rel}"] + ([str(root / rel)] if root is not None else [])
        return {"paths": paths[:64]}
    return {}


def _canaries(folder: Path, manifest: Manifest, *, max_files: int = 12) -> dict[str, list[str]]:
    """Hidden files of the folder (its `hidden:` paths, the grader's and the oracle's modules) and,
    for each, lines distinctive enough that seeing one in a tool's output means the file leaked."""
    root = folder.resolve()
    files: list[Path] = []
    for entry in manifest.hidden:
        path = root / entry
        files += sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path] if path.is_file() else []
    for ref in (manifest.grader, manifest.oracle):
        if ref:
            module = ref.rpartition(":")[0]
            candidate = root / (module if module.endswith(".py") else module.replace(".", "/") + ".py")
            if candidate.is_file():
                files.insert(0, candidate)
    out: dict[str, list[str]] = {}
    for path in files:
        if len(out) >= max_files or "__pycache__" in path.parts:
            continue
        try:
            text = path.read_text(encoding="utf-8")[:65536]
        except (OSError, UnicodeDecodeError):
            continue
        lines = sorted({line.strip() for line in text.splitlines() if len(line.strip()) >= 24}, key=len, reverse=True)[:3]
        if lines:
            out[str(path.relative_to(root))] = lines
    return out


# --- load: concurrency, latency, memory ------------------------------------------------------------


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    return statistics.quantiles(ordered, n=100, method="inclusive")[int(q) - 1]


def _step_action(schema: Any) -> dict[str, Any] | None:
    tools = getattr(schema, "tools", None) or []
    try:
        if tools:
            first = tools[0]
            arguments = sample_from_schema(first.input_schema or {"type": "object"})
            return {"type": "call_tool", "tool_name": first.name, "arguments": arguments}
        return dict(sample_from_schema(schema.action))
    except (SampleError, TypeError, ValueError):
        return None


async def _load_checks(ctx: _Context, card: Scorecard, schema: Any) -> list[CheckResult]:
    sessions = ctx.options.sessions
    if ctx.manifest is not None:  # the capacity the author declared: more sessions are refused, by design
        sessions = min(sessions, ctx.manifest.server.max_sessions)
    if not ctx.tasks:
        return [_skip(n, "no task to play") for n in ("deep.concurrency", "deep.latency", "deep.memory")]
    figures = LoadFigures(sessions=sessions)
    timings: dict[str, list[float]] = {}
    target = ctx.target(graded=False, timings=timings)
    policy: Policy = ctx.oracle or _sampler(ctx.tools)
    action = _step_action(schema)
    idle = ctx.memory() if ctx.memory is not None else None
    peak = idle or 0
    stop = asyncio.Event()

    async def watch() -> None:
        nonlocal peak
        assert ctx.memory is not None
        while not stop.is_set():
            peak = max(peak, await asyncio.to_thread(ctx.memory))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.25)

    async def session(index: int) -> EpisodeRecord:
        planned = ctx.tasks[index % len(ctx.tasks)].model_copy(update={"attempt": index})
        record = EpisodeRecord.start(planned, env=ctx.name, policy=policy.name, model=policy.name)
        client = target.client()
        try:
            async with asyncio.timeout(ctx.options.episode_timeout_s):
                await client.connect()  # untimed: the connection and the schema are not the calls measured
                await client.schema()
                await client.reset(**planned.reset_kwargs)
                if action is not None:
                    await client.step(action)
                await play_episode(record, client, policy, planned, tools=ctx.tools, rubric=_no_grade,
                                   config=EpisodeConfig())  # fmt: skip
        except Exception as e:  # an episode that fails is a finding, not a crash of the check
            record.error = f"{type(e).__name__}: {e}"
        finally:
            with contextlib.suppress(Exception):
                await client.aclose()
        return record

    watcher = asyncio.create_task(watch()) if ctx.memory is not None else None
    started = time.monotonic()
    try:
        records = list(await asyncio.gather(*(session(i) for i in range(sessions))))
    finally:
        stop.set()
        if watcher is not None:
            await watcher
    figures.duration_s = round(time.monotonic() - started, 2)
    figures.episodes = len(records)
    figures.tool_calls = sum(r.tool_calls for r in records)
    figures.tool_errors = sum(r.tool_errors for r in records)
    figures.tool_error_causes = merge_causes(r.tool_error_causes for r in records)
    failed = [r for r in records if r.error is not None]
    figures.failed_episodes = len(failed)
    figures.episode_error_causes = merge_causes({cause_of(r.error or ""): 1} for r in failed)
    figures.latency_ms = {
        what: {"count": len(values), "p50": round(_percentile(values, 50), 1), "p95": round(_percentile(values, 95), 1)}
        for what, values in timings.items() if values
    }  # fmt: skip
    if idle is not None:
        figures.memory_idle_mib = round(idle / _MIB, 1)
        figures.memory_peak_mib = round(peak / _MIB, 1)
        figures.memory_per_session_mib = round(max(0, peak - idle) / _MIB / sessions, 2)
    card.load = figures
    return [_check_concurrency(ctx, figures, policy.name), _check_latency(figures), _check_memory(figures)]


def _sampler(tools: list[dict[str, Any]]) -> ScriptedPolicy:
    """Without an oracle: call each tool once with arguments made from its schema, then stop."""

    def act(messages: list[dict[str, Any]], offered: list[dict[str, Any]], context: Any) -> dict[str, Any] | str:
        if context.turn > 0:
            return "Done."
        calls = []
        for tool in offered:
            function = tool["function"]
            with contextlib.suppress(SampleError):
                calls.append({"name": function["name"], "arguments": sample_from_schema(function["parameters"])})
        return {"content": None, "tool_calls": calls} if calls else "Done."

    return ScriptedPolicy(act, name="sampled-tool-calls")


def _check_concurrency(ctx: _Context, figures: LoadFigures, policy: str) -> CheckResult:
    name = "deep.concurrency"
    where = f"{figures.sessions} sessions at once playing {policy}"
    if figures.failed_episodes:
        cause = next(iter(figures.episode_error_causes))
        return _fail(name, f"{figures.failed_episodes} of {figures.episodes} episodes failed ({where}): {cause}",
                     "Run `openenv eval -c 32` and read the failed episodes: a session must survive its neighbours "
                     "(a resource shared between sessions, a limit such as server.max_sessions)")  # fmt: skip
    if figures.tool_errors and (ctx.oracle is not None):
        cause = next(iter(figures.tool_error_causes))
        fix = _THREAD_FIX if "thread" in cause.lower() else (
               "The oracle's tool calls fail only under load: look for state shared between sessions (module "
               "globals, one file or port for all) and give each session its own")  # fmt: skip
        return _fail(name, f"{figures.tool_errors} of {figures.tool_calls} tool calls failed ({where}): {cause}", fix)
    note = f"; {figures.tool_errors} tool error(s) of sampled arguments" if figures.tool_errors else ""
    return _ok(name, f"{figures.episodes} episodes, {figures.tool_calls} tool calls, no failure ({where}){note}")


def _check_latency(figures: LoadFigures) -> CheckResult:
    parts = [f"{what} p50 {v['p50']:g} ms, p95 {v['p95']:g} ms" for what, v in figures.latency_ms.items()]
    return _ok("deep.latency", f"under {figures.sessions} sessions: " + "; ".join(parts) if parts else "nothing timed")


def _check_memory(figures: LoadFigures) -> CheckResult:
    if figures.memory_per_session_mib is None:
        return _skip("deep.memory", "the server's memory cannot be read here")
    return _ok("deep.memory", f"{figures.memory_per_session_mib:g} MiB per session ({figures.memory_idle_mib:g} MiB idle, "
                              f"{figures.memory_peak_mib:g} MiB peak with {figures.sessions} sessions)")
