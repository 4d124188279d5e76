"""Mixtures and curricula: zero-variance GRPO groups, uniform sampling against sampling by pass rate.

    .venv-trainers/bin/python benchmarks/bench_mixture.py --tiny-model /tmp/mixture-model --build --groups 240 --attempts 8
    .venv-trainers/bin/python benchmarks/bench_mixture.py                      # the scripted policy: 48 tasks per env, 400 groups per mode
    .venv-trainers/bin/python benchmarks/bench_mixture.py --tasks 24 --groups 80 --json out.json

It needs the trainers' venv (`bash scripts/setup_trainers_venv.sh`). Wordle (`environments/wordle`)
and Guess (`examples/guess`) are served as real servers on real ports; the async rollout worker
(`EnvRolloutWorker`) runs groups of 4 episodes on an `EnvMixture` of both (weights 0.7 / 0.3),
through its real episode loop (`run_episode`: chat template, token accounting, MCP tool calls, the
environments' own graders host-side). The policy is either

- `--tiny-model DIR`: a model (`TransformersBackend`, sampling at temperature 1), in practice the
  tiny test model warmed up on both environments' oracle episodes (`mixture_model.py`; `--build`
  builds it into DIR first when DIR holds none: about 2 minutes on a CPU). The untrained tiny
  model never solves a task (every group zero-variance whatever the sampling); the warmed one
  solves some tasks sometimes, as a policy partway through training does;
- or, without it, scripted (`mixture_policy.py`, through `intercept.ScriptedBackend`): each task
  has a fixed chance of being solved, 0 for 35 % of the tasks, 1 for 30 %, in between for the rest.

Three modes, the same tasks, the same number of groups:

- **uniform**: tasks in order, cycling (what the worker does without a curriculum);
- **curriculum**: `Curriculum()` (skip pass rate 0 and 1, prefer 0.2-0.8), pass rates learnt
  online from the worker's own groups only;
- **curriculum + profile**: the same, starting from `openenv eval --profile` of the same policy
  (`--attempts` per task, 4 by default, run here through the real CLI; with a model, its
  `mixture_model.act` plays it, prompted as the worker's rows are).

Figures: the fraction of groups with zero reward variance (dropped by `GroupFilter`), its
reduction against uniform, and the mix of each batch of 32 groups the trainer takes (the
samples in the order the rollout buffer gives them) against the weights.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
import queue
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import mixture_policy as policy  # noqa: E402

WEIGHTS = {"wordle": 0.7, "guess": 0.3}
PASS_THRESHOLD = {"wordle": 1.0, "guess": 0.5}
GROUP_SIZE = 4
BATCH_GROUPS = 32
MAX_TURNS = 3


def wordle_rows(n: int) -> list[dict[str, Any]]:
    from openenv_trainers.tasks import task_row

    return [task_row(policy.wordle_prompt(i), task_id=i) for i in range(n)]


def guess_rows(n: int) -> list[dict[str, Any]]:
    from openenv_trainers.tasks import task_row

    return [task_row(policy.guess_prompt(i), seed=i) for i in range(n)]


@contextlib.contextmanager
def servers() -> Iterator[dict[str, str]]:
    """Wordle and Guess, each a real server on a free port of this host."""
    from openenv_sdk import create_app
    from openenv_sdk.loader import load_environment
    from openenv_sdk.testing import serve_app

    with (
        serve_app(create_app(load_environment(policy.WORDLE_DIR).env_cls), timeout_s=30.0) as wordle,
        serve_app(create_app(load_environment(policy.GUESS_DIR).env_cls), timeout_s=30.0) as guess,
    ):
        yield {"wordle": wordle, "guess": guess}


def make_profiles(urls: dict[str, str], tasks: int, out: Path, *, policy_spec: str, attempts: int = 4) -> dict[str, Path]:
    """`openenv eval --profile` of the policy on each environment (`attempts` per task), through the real CLI."""
    from typer.testing import CliRunner

    from openenv_sdk.cli.main import app

    paths = {}
    for env, env_dir in (("wordle", policy.WORDLE_DIR), ("guess", policy.GUESS_DIR)):
        folder = out / f"eval-{env}"
        args = ["eval", urls[env], "--grader", str(env_dir), "--policy", policy_spec,
                "-n", str(tasks), "-r", str(attempts), "--pass-threshold", str(PASS_THRESHOLD[env]), "-o", str(folder),
                "--max-turns", str(MAX_TURNS), "--profile", "--format", "quiet"]  # fmt: skip
        if env == "wordle":
            args += ["--split", "train"]
        result = CliRunner().invoke(app, args)
        if result.exit_code != 0:
            raise RuntimeError(f"openenv eval {env} failed ({result.exit_code}): {result.output}")
        paths[env] = folder / "profile.json"
    return paths


def _band(rate: float) -> str:
    if rate in (0.0, 1.0):
        return str(int(rate))
    return "(0, 0.2)" if rate < 0.2 else "(0.8, 1)" if rate > 0.8 else "[0.2, 0.8]"


def spread(profiles: dict[str, Path]) -> dict[str, dict[str, int]]:
    """Per environment, the profile's tasks by pass rate: 0, below the band, in it (0.2-0.8), above, 1."""
    from openenv_sdk.evaluation import PassRateProfile

    out = {}
    for env, path in profiles.items():
        counts = {"0": 0, "(0, 0.2)": 0, "[0.2, 0.8]": 0, "(0.8, 1)": 0, "1": 0}
        for t in PassRateProfile.load(path).tasks:
            rate = t.pass_rate or 0.0
            counts[_band(rate)] += 1
        out[env] = counts
    return out


def run_mode(
    mode: str,
    urls: dict[str, str],
    tokenizer: Any,
    *,
    tasks: int,
    groups: int,
    profiles: dict[str, Path] | None,
    seed: int,
    backend: Any | None = None,
    band: tuple[float, float] = (0.2, 0.8),
) -> dict[str, Any]:
    """One worker run of `groups` groups; its zero-variance groups and each batch's mix."""
    from openenv_trainers.advantages import GroupFilter
    from openenv_trainers.episode import EpisodeConfig
    from openenv_trainers.generation import SamplingParams
    from openenv_trainers.intercept import ScriptedBackend
    from openenv_trainers.mixture import Curriculum, EnvMixture, MixtureSource
    from openenv_trainers.pacing import PacingConfig
    from openenv_trainers.sources import EnvSource
    from openenv_trainers.worker import EnvRolloutWorker, WorkerConfig

    from openenv_sdk.loader import load_grader

    policy.reseed(seed)
    rows = {"wordle": wordle_rows(tasks), "guess": guess_rows(tasks)}
    dirs = {"wordle": policy.WORDLE_DIR, "guess": policy.GUESS_DIR}
    mixture = EnvMixture(
        [
            MixtureSource(
                name=env,
                sources=EnvSource(urls[env]),
                tasks=rows[env],
                weight=WEIGHTS[env],
                rubric=load_grader(dirs[env]),
                pass_threshold=PASS_THRESHOLD[env],
                profile=profiles[env] if profiles else None,
            )  # fmt: skip
            for env in ("wordle", "guess")
        ],
        curriculum=None if mode.startswith("uniform") else Curriculum(band=band),
        seed=seed,
    )
    config = WorkerConfig(
        num_generations=GROUP_SIZE, max_inflight_episodes=4 * GROUP_SIZE, buffer_size=64 * GROUP_SIZE,
        episode=EpisodeConfig(sampling=SamplingParams(max_tokens=64, stop_token_ids=(tokenizer.eos_token_id,)), max_turns=MAX_TURNS, max_completion_tokens=400),
        group_filter=GroupFilter(drop_zero_variance=True), pacing=PacingConfig(enabled=False),
        starve_after_dropped_groups=10_000, check_server=False, poll_interval_s=0.005, seed=seed,
    )  # fmt: skip
    backend = backend if backend is not None else ScriptedBackend(tokenizer, policy.script)
    worker = EnvRolloutWorker(sources=mixture, backend=backend, tokenizer=tokenizer, config=config)
    samples: list[Any] = []
    metrics: dict[str, Any] = {}
    started = time.monotonic()
    worker.start()
    try:
        while worker.counters["groups"] < groups:
            with contextlib.suppress(queue.Empty):
                samples.append(worker.rollout_buffer.get(timeout=0.2))
            worker.check_health(120)
            if time.monotonic() - started > 1800:
                raise TimeoutError(f"{mode}: only {worker.counters['groups']} groups in 1800 s")
    finally:
        worker.stop()
    while not worker.rollout_buffer.empty():
        samples.append(worker.rollout_buffer.get_nowait())
    while not worker.metrics_queue.empty():
        metrics.update(worker.metrics_queue.get_nowait())
    c = worker.counters
    rewards = {env: metrics.get(f"worker/source/{env}/reward_mean") for env in WEIGHTS}
    return {
        "mode": mode,
        "last_reward_mean": rewards,
        "groups": c["groups"],
        "zero_variance": c["groups_dropped_zero_variance"],
        "zero_variance_fraction": c["groups_dropped_zero_variance"] / c["groups"],
        "failures": c["episode_failures"] + c["episode_timeouts"],
        "batches": batch_mix(samples),
        "per_source": {k: v for k, v in metrics.items() if k.startswith("worker/source/")},
        "duration_s": time.monotonic() - started,
    }


def source_of(sample: Any) -> str:
    text = " ".join(str(m.get("content") or "") for m in sample.prompt)
    return "wordle" if "[wordle task" in text else "guess"


def batch_mix(samples: list[Any]) -> dict[str, Any]:
    """Each full batch of `BATCH_GROUPS` groups (in the buffer's order): the largest distance of a
    source's share from its weight."""
    size = BATCH_GROUPS * GROUP_SIZE
    errors = []
    for start in range(0, len(samples) - size + 1, size):
        batch = samples[start : start + size]
        shares = {env: sum(source_of(s) == env for s in batch) / size for env in WEIGHTS}
        errors.append(max(abs(shares[env] - w) for env, w in WEIGHTS.items()))
    return {
        "count": len(errors),
        "max_error": max(errors, default=float("nan")),
        "mean_error": sum(errors) / len(errors) if errors else float("nan"),
    }


def model_backend(model_dir: Path, seed: int) -> tuple[Any, Any]:
    """The model in `model_dir` as the worker's generation backend (`TransformersBackend`), and its tokenizer."""
    import torch
    from openenv_trainers.chat import use_tool_chat_template
    from openenv_trainers.generation import TransformersBackend
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(seed)
    tokenizer = use_tool_chat_template(AutoTokenizer.from_pretrained(model_dir))
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    return TransformersBackend(model, pad_token_id=tokenizer.pad_token_id), tokenizer


def run(
    *,
    tasks: int,
    groups: int,
    seed: int = 0,
    model_dir: Path | None = None,
    attempts: int = 4,
    band: tuple[float, float] = (0.2, 0.8),
) -> dict[str, Any]:
    """The three modes; with `model_dir`, that model is the policy (worker and profile), else the scripted one."""
    import os

    import torch
    from openenv_trainers.tiny_model import build_tiny_tokenizer

    started = time.monotonic()
    if model_dir is not None:
        torch.set_num_threads(1)  # a small shared CPU: more threads are slower (as train_env)
        os.environ["MIXTURE_MODEL"] = str(model_dir)
        spec = f"scripted:{HERE / 'mixture_model.py'}:act"
    else:
        spec = f"scripted:{HERE / 'mixture_policy.py'}:act"
    tokenizer = build_tiny_tokenizer() if model_dir is None else model_backend(model_dir, seed)[1]

    def backend() -> Any | None:  # a fresh one per mode, sampling from the same seed
        return None if model_dir is None else model_backend(model_dir, seed)[0]

    timings = {}
    with servers() as urls, tempfile.TemporaryDirectory() as tmp:
        t0 = time.monotonic()
        profiles = make_profiles(urls, tasks, Path(tmp), policy_spec=spec, attempts=attempts)
        timings["profile"] = time.monotonic() - t0
        profile_spread = spread(profiles)
        results = []
        for mode, given in (("uniform", None), ("curriculum", None), ("curriculum + profile", profiles)):
            results.append(run_mode(mode, urls, tokenizer, tasks=tasks, groups=groups, profiles=given, seed=seed,
                                    backend=backend(), band=band))  # fmt: skip
    base = results[0]["zero_variance_fraction"]
    for r in results:
        r["reduction"] = 1 - r["zero_variance_fraction"] / base if base else float("nan")
    report: dict[str, Any] = {
        "machine": f"{platform.machine()}, {platform.system()}, Python {platform.python_version()}",
        "policy": spec.rsplit("/", 1)[-1] if model_dir is None else f"the model in {model_dir} (mixture_model.py)",
        "tasks_per_env": tasks,
        "groups_per_mode": groups,
        "group_size": GROUP_SIZE,
        "weights": WEIGHTS,
        "batch_groups": BATCH_GROUPS,
        "profile_attempts": attempts,
        "band": list(band),
        "profile_spread": profile_spread,
        "results": results,
        "seconds": {"profile": timings["profile"], "total": time.monotonic() - started},
    }
    if model_dir is not None and (model_dir / "mixture-model.json").is_file():
        report["model"] = json.loads((model_dir / "mixture-model.json").read_text())
    return report


def table(report: dict[str, Any]) -> str:
    lines = [
        f"{report['tasks_per_env']} tasks per environment, {report['groups_per_mode']} groups of "
        f"{report['group_size']} per mode, weights {report['weights']}; {report['machine']}",
        "| sampling | groups | zero-variance groups | fraction | reduction vs uniform | batch mix error, max / mean |",
        "|---|---|---|---|---|---|",
    ]
    for r in report["results"]:
        b = r["batches"]
        lines.append(
            f"| {r['mode']} | {r['groups']} | {r['zero_variance']} | {r['zero_variance_fraction']:.1%} | "
            f"{r['reduction']:.0%} | {b['max_error']:.1%} / {b['mean_error']:.1%} ({b['count']} batches) |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=48, help="tasks per environment")
    parser.add_argument("--groups", type=int, default=400, help="groups per mode")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--attempts", type=int, default=4, help="openenv eval --profile's attempts per task")
    parser.add_argument("--band", type=float, nargs=2, default=[0.2, 0.8], metavar=("LOW", "HIGH"),
                        help="the curriculum's preferred pass rates (default: 0.2 0.8, Curriculum's)")  # fmt: skip
    parser.add_argument("--json", type=Path, help="write the figures here too")
    parser.add_argument(
        "--tiny-model", type=Path, help="this model (a save_pretrained folder) as the policy, not the scripted one"
    )
    parser.add_argument("--build", action="store_true",
                        help="build --tiny-model first when the folder holds none (mixture_model.py's defaults)")  # fmt: skip
    args = parser.parse_args()
    if args.build:
        if args.tiny_model is None:
            parser.error("--build needs --tiny-model FOLDER (where the model goes)")
        import mixture_model

        print(json.dumps(mixture_model.build(args.tiny_model, tasks=max(args.tasks, 48)), indent=2))
    report = run(tasks=args.tasks, groups=args.groups, seed=args.seed, model_dir=args.tiny_model, attempts=args.attempts,
                 band=tuple(args.band))  # fmt: skip
    print(table(report))
    print(f"profile's tasks by pass rate: {json.dumps(report['profile_spread'])}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
