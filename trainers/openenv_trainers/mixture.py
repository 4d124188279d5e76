"""Training on several environments at once, with weights, and sampling tasks by pass rate.

    mixture = EnvMixture(
        [
            MixtureSource(name="wordle", sources=EnvSource(env_dir="environments/wordle"), tasks=wordle_rows,
                          weight=0.7, profile="evals/wordle/run/profile.json"),
            MixtureSource(name="guess", sources=EnvSource(env_dir="examples/guess"), tasks=guess_rows,
                          weight=0.3, pass_threshold=0.5),
        ],
        curriculum=Curriculum(band=(0.2, 0.8)),
    )
    worker = EnvRolloutWorker(sources=mixture, backend=backend, tokenizer=tokenizer, config=config)

Each `MixtureSource` is one environment: its servers, its tasks (dataset rows, as
`tasks.task_row` makes them), its grader and its weight. The worker asks the mixture for every
group's task (`EnvMixture.draw`), runs the group on that environment's servers with its grader,
and reports the rewards back (`EnvMixture.record`).

- **The mix.** The environment of the next group is the one furthest behind its weight, counting
  the groups delivered to the trainer, waiting and running (not those dropped: a zero-variance or
  failed group is made up for). Groups end in any order and some are dropped, so the worker also
  hands a finished group to the trainer only in its environment's turn (`EnvMixture.turn`: no
  environment more than a fraction of a group ahead of its weight), waiting at most `max_hold_s`;
  every batch the trainer takes then holds each environment at its weight, within a group. An
  environment whose last 32 groups were all dropped (`starved`: every task too hard or too easy
  now) is not waited for, and its dropped groups are no longer made up: it is admitted at its
  weight, and the others' batches share its place until it delivers again.
- **The curriculum.** GRPO learns nothing from a group whose rewards are all equal, and a task the
  policy always or never passes gives such groups. With a `Curriculum`, each environment's sampler
  keeps a pass rate per task (from an `openenv eval --profile` file, then from the worker's own
  groups, recent ones weighing more), skips tasks at pass rate 0 or 1, prefers tasks inside the
  band, and now and then revisits a skipped task (the policy changes). Without one, tasks are
  taken in order, cycling, as a plain worker does.
- **Metrics**, per environment: `worker/source/<name>/reward_mean`, `reward_std`, `pass_rate`
  (of the group), `groups`, `groups_trained`, `groups_delivered`, `groups_zero_variance`, `share`
  (of the groups delivered to the trainer: the weight's match), `holds_expired`, `starved`, and
  with a curriculum `tasks_skipped`, `tasks_in_band`, `tasks_out_of_band`, `tasks_unknown`
  (beside the per-server counters of `source_counters`).

A task is matched to a profile's task by its reset arguments (the row's task fields, `seed`
included), so the rows of `openenv eval`'s Task API tasks match their profile entries exactly.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import json
import logging
import math
import random
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openenv_sdk.evaluation import PassRateProfile

from .chat import tool_schemas
from .sources import EnvSource
from .tasks import split_task
from .trl_env import TRL_COLUMNS

logger = logging.getLogger(__name__)

__all__ = ["Curriculum", "Draw", "EnvMixture", "MixtureSource", "PassRates", "TaskSampler", "task_key"]


def task_key(row: Mapping[str, Any]) -> str:
    """What identifies a row's task: its reset arguments (`seed` included), as canonical JSON.

    The same fields the worker passes to `reset`: the row's columns but TRL's, else the task the
    prompt carries (`tasks.task_prompt`).
    """
    task = {k: v for k, v in row.items() if k not in TRL_COLUMNS}
    if not task:
        prompt = row.get("prompt")
        embedded = split_task(prompt)[1] if isinstance(prompt, list) else None
        task = dict(embedded or {})
    return json.dumps(task, sort_keys=True, default=str, separators=(",", ":"))


@dataclass(frozen=True, kw_only=True)
class Curriculum:
    """How a sampler picks tasks by pass rate. Pass rates are fractions of episodes that passed."""

    band: tuple[float, float] = (0.2, 0.8)
    """Pass rates the sampler prefers: a task inside weighs 1, one outside (but not 0 or 1) `out_of_band_weight`."""
    out_of_band_weight: float = 0.25
    """The weight of a task whose pass rate is outside the band, but neither 0 nor 1."""
    unknown_weight: float = 1.0
    """The weight of a task with fewer than `min_attempts` attempts seen (worth trying)."""
    min_attempts: float = 4.0
    """Attempts (decayed) before a task's pass rate is trusted; a single group of `num_generations` is enough by default."""
    decay: float = 0.5
    """Each new group of a task multiplies the older evidence by this (1.0: all groups weigh the same)."""
    revisit_probability: float = 0.02
    """The chance that a draw takes a skipped task (pass rate 0 or 1) anyway: the policy moves on."""
    skip_margin: float = 0.05
    """A pass rate within this of 0 or 1 counts as 0 or 1 (skipped). Decayed evidence never
    reaches 0 exactly: a task a profile saw pass once, and that failed every group since, stays
    just above 0 (at 1/8 then two groups of 0/4: 0.03), and would be drawn forever as out of band."""

    def __post_init__(self) -> None:
        low, high = self.band
        if not 0.0 <= low <= high <= 1.0:
            raise ValueError(f"band must be (low, high) with 0 <= low <= high <= 1, got {self.band}")
        if self.out_of_band_weight < 0 or self.unknown_weight < 0:
            raise ValueError("out_of_band_weight and unknown_weight must be >= 0")
        if self.min_attempts <= 0:
            raise ValueError(f"min_attempts must be positive, got {self.min_attempts}")
        if not 0.0 < self.decay <= 1.0:
            raise ValueError(f"decay must be in (0, 1], got {self.decay}")
        if not 0.0 <= self.revisit_probability <= 1.0:
            raise ValueError(f"revisit_probability must be in [0, 1], got {self.revisit_probability}")
        if not 0.0 <= self.skip_margin < 0.5:
            raise ValueError(f"skip_margin must be in [0, 0.5), got {self.skip_margin}")


class PassRates:
    """Each task's pass rate: attempts and passes, older groups decayed by `decay` at each new one."""

    def __init__(self, *, decay: float = 1.0) -> None:
        self.decay = decay
        self._attempts: dict[str, float] = {}
        self._passed: dict[str, float] = {}

    def prior(self, key: str, *, attempts: float, passed: float) -> None:
        """Set a task's evidence (a profile's counts), replacing what was there."""
        if attempts < 0 or not 0 <= passed <= attempts:
            raise ValueError(f"a task needs 0 <= passed <= attempts, got passed={passed}, attempts={attempts}")
        self._attempts[key], self._passed[key] = float(attempts), float(passed)

    def update(self, key: str, *, attempts: int, passed: int) -> None:
        """Add one group of a task: `attempts` graded episodes, `passed` of them passed."""
        if attempts < 0 or not 0 <= passed <= attempts:
            raise ValueError(f"a group needs 0 <= passed <= attempts, got passed={passed}, attempts={attempts}")
        self._attempts[key] = self._attempts.get(key, 0.0) * self.decay + attempts
        self._passed[key] = self._passed.get(key, 0.0) * self.decay + passed

    def rate(self, key: str) -> float | None:
        """The task's pass rate; None when it was never attempted."""
        attempts = self._attempts.get(key, 0.0)
        return self._passed[key] / attempts if attempts > 0 else None

    def attempts(self, key: str) -> float:
        """The (decayed) attempts seen."""
        return self._attempts.get(key, 0.0)


class TaskSampler:
    """Picks one environment's tasks: in order (no curriculum) or by pass rate (`Curriculum`)."""

    def __init__(
        self,
        tasks: Sequence[Mapping[str, Any]],
        *,
        curriculum: Curriculum | None = None,
        rates: PassRates | None = None,
        seed: int = 0,
    ) -> None:
        if not tasks:
            raise ValueError("a sampler needs at least one task")
        self.tasks = list(tasks)
        self.keys = [task_key(row) for row in self.tasks]
        self.curriculum = curriculum
        self.rates = rates or PassRates(decay=curriculum.decay if curriculum else 1.0)
        self._rng = random.Random(seed)
        self._next = 0
        self.fallbacks = 0
        """Draws taken uniformly because every task was skipped (all at pass rate 0 or 1)."""

    def kind(self, key: str) -> str:
        """`unknown`, `skipped` (pass rate 0 or 1), `in_band` or `out_of_band`."""
        c = self.curriculum or Curriculum()
        rate = self.rates.rate(key)
        if rate is None or self.rates.attempts(key) < c.min_attempts:
            return "unknown"
        if rate <= c.skip_margin or rate >= 1.0 - c.skip_margin:
            return "skipped"
        return "in_band" if c.band[0] <= rate <= c.band[1] else "out_of_band"

    def draw(self) -> int:
        """The index of the next task."""
        c = self.curriculum
        if c is None:
            index = self._next % len(self.tasks)
            self._next += 1
            return index
        kinds = [self.kind(key) for key in self.keys]
        weights = {"unknown": c.unknown_weight, "skipped": 0.0, "in_band": 1.0, "out_of_band": c.out_of_band_weight}
        skipped = [i for i, k in enumerate(kinds) if k == "skipped"]
        if skipped and self._rng.random() < c.revisit_probability:
            return self._rng.choice(skipped)
        w = [weights[k] for k in kinds]
        if sum(w) <= 0:
            self.fallbacks += 1
            return self._rng.randrange(len(self.tasks))
        return self._rng.choices(range(len(self.tasks)), weights=w)[0]

    def counts(self) -> dict[str, int]:
        """How many tasks are of each kind now."""
        out = dict.fromkeys(("unknown", "skipped", "in_band", "out_of_band"), 0)
        for key in self.keys:
            out[self.kind(key)] += 1
        return out


@dataclass(frozen=True, kw_only=True)
class MixtureSource:
    """One environment of a mixture: its servers, tasks, grader and weight."""

    name: str
    """The label of its metrics (`worker/source/<name>/...`); unique in the mixture."""
    sources: EnvSource | Sequence[EnvSource]
    """The environment's servers (one, or several replicas; each keeps its own circuit breaker)."""
    tasks: Iterable[Mapping[str, Any]]
    """Dataset rows (`tasks.task_row`); read once, into a list."""
    weight: float = 1.0
    """Its share of the groups, relative to the other sources' weights."""
    rubric: Any | None = None
    """The host-side grader; default the one the first server's `openenv.yaml` names."""
    pass_threshold: float = 1.0
    """An episode passes when its reward is at least this (the curriculum's pass rate)."""
    profile: str | Path | PassRateProfile | None = None
    """Pass rates from `openenv eval --profile` (the file, or the loaded profile): the curriculum's prior."""

    def __post_init__(self) -> None:
        if not self.name or "/" in self.name:
            raise ValueError(f"a mixture source needs a name without '/' (a metric key level), got {self.name!r}")
        if not (self.weight > 0 and math.isfinite(self.weight)):
            raise ValueError(f"{self.name}: weight must be a positive number, got {self.weight}")

    @property
    def env_sources(self) -> list[EnvSource]:
        return [self.sources] if isinstance(self.sources, EnvSource) else list(self.sources)


_STARVED_AFTER = 32
"""A source whose last this many groups were all dropped is starved (`_Member.starved`)."""


@dataclass
class _Member:
    """A source's state in the mixture: its sampler, grader, tools and counts."""

    spec: MixtureSource
    sampler: TaskSampler
    rubric: Any
    share: float
    tools: list[dict[str, Any]] | None = None
    admitted: int = 0
    running: int = 0
    waiting: int = 0
    delivered: int = 0
    holds_expired: int = 0
    base_delivered: int = 0
    base_counted: int = 0
    """Its counts when the set of starved sources last changed: the mix is kept from then on."""
    recent: collections.deque[bool] = field(default_factory=lambda: collections.deque(maxlen=_STARVED_AFTER))
    """Whether each of its latest groups was trained on."""

    @property
    def starved(self) -> bool:
        """Its latest groups were all dropped: its weight cannot be met now, and the others must not wait for it."""
        return len(self.recent) == self.recent.maxlen and not any(self.recent)

    def counted(self) -> int:
        """Its groups as the mix counts them: delivered or still able to be; a starved source's every group."""
        return self.admitted if self.starved else self.delivered + self.waiting + self.running

    groups_trained: int = 0
    groups_zero_variance: int = 0
    episodes: int = 0
    passed: int = 0
    reward_sum: float = 0.0


@dataclass(frozen=True, eq=False)
class Draw:
    """One group's task: which source, which row, and its key (for `EnvMixture.record`); equal only to itself."""

    source: str
    row: Mapping[str, Any]
    key: str
    id: int
    rubric: Any = field(repr=False)
    tools: list[dict[str, Any]] = field(repr=False)
    env_sources: list[EnvSource] = field(repr=False)


class EnvMixture:
    """Several environments, each with its weight; hands out each group's task (see the module docstring)."""

    def __init__(
        self,
        sources: Sequence[MixtureSource],
        *,
        curriculum: Curriculum | None = None,
        seed: int = 0,
        max_hold_s: float = 60.0,
    ) -> None:
        """Read every source's tasks and profile.

        Args:
            sources: the environments, each with its weight.
            curriculum: sample tasks by pass rate; None takes each source's tasks in order.
            seed: the samplers' random seed.
            max_hold_s: the longest a finished group waits for its source's turn (`turn`)
                before it goes to the trainer anyway (counted, `worker/source/<name>/holds_expired`).

        Raises:
            ValueError: no sources, two with one name, a source without tasks or whose grader
                cannot be found, or a profile that cannot be read.
        """
        if not sources:
            raise ValueError("a mixture needs at least one MixtureSource")
        names = [s.name for s in sources]
        if len(set(names)) != len(names):
            raise ValueError(f"mixture source names must be unique, got {names}")
        self.curriculum = curriculum
        total = math.fsum(s.weight for s in sources)
        self._members: dict[str, _Member] = {}
        for i, spec in enumerate(sources):
            tasks = list(spec.tasks)
            if not tasks:
                raise ValueError(f"mixture source {spec.name!r} has no tasks")
            sampler = TaskSampler(tasks, curriculum=curriculum, seed=seed * 1_000_003 + i)
            if spec.profile is not None:
                _apply_profile(sampler, spec)
            rubric = spec.rubric if spec.rubric is not None else spec.env_sources[0].grader()
            self._members[spec.name] = _Member(spec=spec, sampler=sampler, rubric=rubric, share=spec.weight / total)
        if max_hold_s < 0:
            raise ValueError(f"max_hold_s must be >= 0, got {max_hold_s}")
        self.max_hold_s = max_hold_s
        # Some source can always deliver when each may run this far ahead (the shares sum to 1).
        self._slack = 1.0 - 1.0 / len(self._members)
        self._open: dict[int, str] = {}  # draw id -> "running" | "waiting"
        self._starved: frozenset[str] = frozenset()
        self._ids = itertools.count()
        self._lock = threading.Lock()

    @property
    def sources(self) -> list[MixtureSource]:
        return [m.spec for m in self._members.values()]

    @property
    def env_sources(self) -> list[EnvSource]:
        """Every server of every source, in order."""
        return [env for m in self._members.values() for env in m.spec.env_sources]

    @property
    def weights(self) -> dict[str, float]:
        """Each source's share of the groups (the weights, normalised)."""
        return {name: m.share for name, m in self._members.items()}

    def sampler(self, name: str) -> TaskSampler:
        return self._members[name].sampler

    def load_tools(self) -> None:
        """Read each environment's tools from its first server (`start()` of the worker calls it)."""
        for member in self._members.values():
            if member.tools is None:
                member.tools = tool_schemas(member.spec.env_sources[0].tools())

    def next_source(self) -> str:
        """The source furthest behind its weight, by groups delivered and running."""
        with self._lock:
            counted = sum(m.counted() - m.base_counted for m in self._members.values()) + 1
            return max(self._members, key=lambda n: self._deficit(self._members[n], counted))

    @staticmethod
    def _deficit(member: _Member, counted: int) -> float:
        return member.share * counted - (member.counted() - member.base_counted)

    def draw(self) -> Draw:
        """The next group's task; the group counts as running until `release`."""
        name = self.next_source()
        with self._lock:
            member = self._members[name]
            index = member.sampler.draw()
            member.admitted += 1
            member.running += 1
            draw_id = next(self._ids)
            self._open[draw_id] = "running"
        return Draw(
            source=name, row=member.sampler.tasks[index], key=member.sampler.keys[index], id=draw_id, rubric=member.rubric,
            tools=member.tools or [], env_sources=member.spec.env_sources,
        )  # fmt: skip

    def record(self, draw: Draw, rewards: Sequence[float], *, trained: bool, zero_variance: bool = False) -> dict[str, float]:
        """Count a finished group (its graded episodes' rewards) and update its task's pass rate; a
        group to be trained on then waits for its `turn`, any other is over.

        Returns:
            The source's metrics (`worker/source/<name>/...`), for the worker's metrics queue.
        """
        with self._lock:
            member = self._members[draw.source]
            passed = sum(1 for r in rewards if r >= member.spec.pass_threshold)
            if rewards:
                member.sampler.rates.update(draw.key, attempts=len(rewards), passed=passed)
            if self._open.get(draw.id) == "running":
                member.running -= 1
                if trained:
                    member.waiting += 1
                    self._open[draw.id] = "waiting"
                else:
                    del self._open[draw.id]
            member.groups_trained += int(trained)
            member.recent.append(trained)
            starved = frozenset(name for name, m in self._members.items() if m.starved)
            if starved != self._starved:
                # A source stopped (or started again) delivering: keep the mix from now on, rather
                # than make the others wait while it catches up on the past, or the reverse.
                self._starved = starved
                for m in self._members.values():
                    m.base_delivered, m.base_counted = m.delivered, m.counted()
            member.groups_zero_variance += int(zero_variance)
            member.episodes += len(rewards)
            member.passed += passed
            member.reward_sum += math.fsum(rewards)
            prefix = f"worker/source/{draw.source}/"
            out = self._counts(member, prefix)
            if rewards:
                mean = math.fsum(rewards) / len(rewards)
                out[prefix + "reward_mean"] = mean
                out[prefix + "reward_std"] = math.sqrt(math.fsum((r - mean) ** 2 for r in rewards) / len(rewards))
                out[prefix + "pass_rate"] = passed / len(rewards)
            return out

    def try_deliver(self, draw: Draw, *, force: bool = False) -> bool:
        """Deliver a recorded group if it is its source's turn (or `force`); True when delivered."""
        with self._lock:
            member = self._members[draw.source]
            if self._open.get(draw.id) != "waiting":
                return True  # not held here (released): nothing to wait for
            # The turn is among the sources that deliver: a starved one is not waited for.
            members = [m for m in self._members.values() if m is member or not m.starved]
            share = member.share / math.fsum(m.share for m in members)
            total = sum(m.delivered - m.base_delivered for m in members)
            mine = member.delivered - member.base_delivered
            if not force and mine + 1 > share * (total + 1) + self._slack + 1e-9:
                return False
            del self._open[draw.id]
            member.waiting -= 1
            member.delivered += 1
            member.holds_expired += int(force)
            return True

    async def turn(self, draw: Draw, *, poll_interval_s: float = 0.01, stopping: threading.Event | None = None) -> None:
        """Wait until this recorded group may go to the trainer: no source runs more than a
        fraction of a group ahead of its weight; at most `max_hold_s` (then it goes anyway)."""
        deadline = time.monotonic() + self.max_hold_s
        while not self.try_deliver(draw):
            if time.monotonic() >= deadline or (stopping is not None and stopping.is_set()):
                self.try_deliver(draw, force=True)
                return
            await asyncio.sleep(poll_interval_s)

    def release(self, draw: Draw) -> None:
        """Forget a group that will not be delivered (its task failed, the worker stops)."""
        with self._lock:
            state = self._open.pop(draw.id, None)
            member = self._members[draw.source]
            if state == "running":
                member.running -= 1
            elif state == "waiting":
                member.waiting -= 1

    def _counts(self, member: _Member, prefix: str) -> dict[str, float]:
        delivered = sum(m.delivered for m in self._members.values())
        out = {
            prefix + "groups": float(member.admitted),
            prefix + "groups_trained": float(member.groups_trained),
            prefix + "groups_zero_variance": float(member.groups_zero_variance),
            prefix + "groups_delivered": float(member.delivered),
            prefix + "holds_expired": float(member.holds_expired),
            prefix + "starved": float(member.starved),
            prefix + "share": member.delivered / delivered if delivered else 0.0,
        }
        if self.curriculum is not None:
            out.update({prefix + f"tasks_{k}": float(v) for k, v in member.sampler.counts().items()})
        return out

    def metrics(self) -> dict[str, float]:
        """Every source's counters now."""
        with self._lock:
            out: dict[str, float] = {}
            for name, member in self._members.items():
                out.update(self._counts(member, f"worker/source/{name}/"))
            return out


def _apply_profile(sampler: TaskSampler, spec: MixtureSource) -> None:
    profile = spec.profile
    if not isinstance(profile, PassRateProfile):
        profile = PassRateProfile.load(Path(str(profile)))
    if not math.isclose(profile.pass_threshold, spec.pass_threshold):
        raise ValueError(
            f"{spec.name}: the profile counted passes at reward >= {profile.pass_threshold:g}, the source at "
            f">= {spec.pass_threshold:g}: set MixtureSource.pass_threshold={profile.pass_threshold:g}, or profile "
            f"again with openenv eval --profile --pass-threshold {spec.pass_threshold:g}"
        )
    by_key = {task_key(entry.reset_kwargs): entry for entry in profile.tasks}
    matched = 0
    for key in sampler.keys:
        entry = by_key.get(key)
        if entry is not None and entry.graded:
            sampler.rates.prior(key, attempts=entry.graded, passed=entry.passed)
            matched += 1
    if not matched:
        logger.warning("%s: none of the profile's %d tasks is among its %d tasks (matched by reset arguments)",
                       spec.name, len(profile.tasks), len(sampler.keys))  # fmt: skip
