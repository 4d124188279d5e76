"""The tiny model partway through training on Wordle + Guess: the policy of bench_mixture.py.

    .venv-trainers/bin/python benchmarks/mixture_model.py /tmp/mixture-model          # builds it (minutes on a CPU)
    .venv-trainers/bin/python benchmarks/bench_mixture.py --tiny-model /tmp/mixture-model --build

An untrained tiny model never solves a Wordle or Guess task, so every GRPO group of it has zero
reward variance and a curriculum has nothing to choose. This builds a policy that solves some
tasks sometimes, with the trainers' own machinery and no scripting of the policy:

1. the tiny test model (`tiny_model.build_tiny_model`: tokenizer, Qwen2 weights, the tool-call
   format), as `train_env --model tiny` starts from;
2. each environment's oracle plays the tasks through `openenv collect` (`train_env.collect_oracle`):
   Wordle's own oracle (it reads the task's word), and for Guess `mixture_policy.oracle`, which
   bisects on the environment's "higher"/"lower" (the oracle of docs/trainers/train-your-environment.md);
3. an SFT warm-up (`warmup.assistant_labels`, `warmup.sft_warmup`, `train_env`'s settings: AdamW,
   lr 1e-2 decayed to 0, gradients clipped at 1) on those episodes, each prompted as the
   benchmark's dataset rows are (`mixture_policy.wordle_prompt`: the prompt names the task, so
   that a policy can tell the tasks apart). It warms up on a part of the tasks only
   (`--train-every`) and stops early (`--steps`): the model then half-knows a few Wordle words
   and bisects imperfectly, and sampling at temperature 1 spreads the tasks' pass rates, as a
   real policy's are partway through training.

`act` plays the saved model as `openenv eval --policy scripted:benchmarks/mixture_model.py:act`
(the model's folder in `$MIXTURE_MODEL`), prompting it as the rollout worker does, so that the
profile `openenv eval --profile` writes is the same policy's pass rates.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from functools import cache
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import mixture_policy as policy  # noqa: E402

ORACLE = f"scripted:{HERE / 'mixture_policy.py'}:oracle"
MAX_TURNS = 3
"""The most assistant turns of an episode (the benchmark's `EpisodeConfig.max_turns`)."""
ORACLE_TURNS = {"wordle": MAX_TURNS, "guess": 5}
"""The oracle's turns: Guess's bisection needs up to 4 guesses and a last word."""
MAX_TOKENS = 64
"""The most tokens of one sampled turn (the benchmark's `SamplingParams.max_tokens`)."""


def prompt_of(env: str, task_id: str) -> list[dict[str, Any]]:
    """The benchmark's prompt of a task from `openenv collect`'s task id (`17` or `seed-17`)."""
    if env == "wordle":
        return policy.wordle_prompt(int(task_id))
    return policy.guess_prompt(int(task_id.removeprefix("seed-")))


def task_index(task_id: str) -> int:
    return int(task_id.removeprefix("seed-"))


def collect(env: str, tasks: int, out: Path) -> list[Any]:
    """The oracle's episodes of the first `tasks` tasks (`openenv collect`, resumed from `out`)."""
    from openenv_trainers.train_env import TrainEnvConfig, collect_oracle

    env_dir = policy.WORDLE_DIR if env == "wordle" else policy.GUESS_DIR
    config = TrainEnvConfig(
        env_dir=env_dir, out=out / env, policy=None if env == "wordle" else ORACLE, max_turns=ORACLE_TURNS[env]
    )
    _, records = collect_oracle(config, tasks)
    return records


def examples(tokenizer: Any, env: str, records: list[Any]) -> list[tuple[list[int], list[int]]]:
    """`(input_ids, labels)` of each episode the oracle won, its prompt replaced by the benchmark's."""
    from openenv_trainers.warmup import assistant_labels

    from openenv_sdk.evaluation import chat_messages

    out = []
    for r in records:
        if r.error is not None or not r.reward_components.get("solved"):
            continue
        messages = chat_messages(r.messages)
        first = next(i for i, m in enumerate(messages) if m["role"] == "assistant")
        out.append(assistant_labels(tokenizer, prompt_of(env, r.task_id) + messages[first:], tools=r.tools))
    return out


def build(
    folder: Path,
    *,
    tasks: int = 48,
    train_every: int = 4,
    steps: int = 250,
    lr: float = 1e-2,
    batch: int = 8,
    seed: int = 0,
    cache_dir: Path | None = None,
    threads: int = 1,
) -> dict[str, Any]:
    """Build the warmed model into `folder` (reused when it holds one); returns what was done.

    It warms up on the tasks `i` of `range(tasks)` with `i % train_every != train_every - 1`
    (all of them with `train_every=1`), on both environments.
    """
    import torch
    from openenv_trainers.demo import _load
    from openenv_trainers.warmup import sft_warmup

    folder = Path(folder)
    summary_file = folder / "mixture-model.json"
    if summary_file.is_file() and (folder / "config.json").is_file():
        return dict(json.loads(summary_file.read_text()))
    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    cache_dir = cache_dir or Path(os.environ.get("OPENENV_TRAINERS_CACHE") or Path.home() / ".cache" / "openenv-trainers")
    started = time.monotonic()
    timings: dict[str, float] = {}
    t0 = time.monotonic()
    model, tokenizer = _load("tiny", cache_dir, "cpu")
    timings["load"] = time.monotonic() - t0
    t0 = time.monotonic()
    data: list[tuple[list[int], list[int]]] = []
    trained: dict[str, list[int]] = {}
    for env in ("wordle", "guess"):
        records = [r for r in collect(env, tasks, folder / "oracle") if task_index(r.task_id) % train_every != train_every - 1]
        trained[env] = sorted(task_index(r.task_id) for r in records)
        data += examples(tokenizer, env, records)
    timings["collect"] = time.monotonic() - t0
    t0 = time.monotonic()
    losses = sft_warmup(model, tokenizer, data, steps=steps, lr=lr, batch_size=batch, seed=seed, max_grad_norm=1.0,
                        lr_decay=True)  # fmt: skip
    timings["warmup"] = time.monotonic() - t0
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    timings["total"] = time.monotonic() - started
    summary = {
        "base": "tiny (openenv_trainers.tiny_model.build_tiny_model)",
        "parameters": sum(p.numel() for p in model.parameters()),
        "tasks": tasks, "train_every": train_every, "trained_tasks": trained, "examples": len(data),
        "steps": steps, "lr": lr, "batch": batch, "seed": seed, "threads": threads,
        "loss_first": losses[0], "loss_last": statistics.fmean(losses[-10:]), "seconds": timings,
    }  # fmt: skip
    summary_file.write_text(json.dumps(summary, indent=2) + "\n")
    return summary


# --- the model as `openenv eval`'s policy --------------------------------------------------------

_lock = threading.Lock()


@cache
def _model() -> tuple[Any, Any]:
    import torch
    from openenv_trainers.chat import use_tool_chat_template
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = os.environ.get("MIXTURE_MODEL")
    if not folder:
        raise RuntimeError("set MIXTURE_MODEL to the model's folder (benchmarks/mixture_model.py builds one)")
    torch.set_num_threads(int(os.environ.get("MIXTURE_THREADS", "1")))
    tokenizer = use_tool_chat_template(AutoTokenizer.from_pretrained(folder))
    return AutoModelForCausalLM.from_pretrained(folder).eval(), tokenizer


def act(messages: list[dict[str, Any]], tools: list[dict[str, Any]], context: Any) -> dict[str, Any]:
    """One turn of the model, sampled at temperature 1 (as the rollout worker samples), prompted with
    the benchmark's prompt of the task in place of the reset observation."""
    import torch
    from openenv_trainers.chat import parse_assistant

    from openenv_sdk.evaluation import chat_messages

    env = "wordle" if "word" in tools[0]["function"]["parameters"]["properties"] else "guess"
    first = next((i for i, m in enumerate(messages) if m["role"] == "assistant"), len(messages))
    # chat_messages: tool-call arguments as dicts, as the worker's turns are rendered (a JSON string would render quoted)
    conversation = prompt_of(env, str(context.task_id)) + chat_messages(messages[first:])
    with _lock:  # one generation at a time: eval runs policies in threads
        model, tokenizer = _model()
        ids = tokenizer.apply_chat_template(conversation, tools=tools, tokenize=True, return_dict=False,
                                            add_generation_prompt=True)  # fmt: skip
        with torch.no_grad():
            out = model.generate(torch.tensor([list(ids)]), max_new_tokens=MAX_TOKENS, do_sample=True, temperature=1.0,
                                 top_k=0, top_p=1.0, eos_token_id=tokenizer.eos_token_id,
                                 pad_token_id=tokenizer.pad_token_id)  # fmt: skip
    sampled = out[0, len(ids) :].tolist()
    message = parse_assistant(tokenizer, sampled, prefix=list(ids), tools=tools)
    calls = [{"name": c["function"]["name"], "arguments": c["function"]["arguments"]} for c in message.get("tool_calls") or []]
    if calls:
        return {"content": message.get("content") or None, "tool_calls": calls}
    return {
        "content": message.get("content") or "",
        "finish_reason": "length" if tokenizer.eos_token_id not in sampled else "stop",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="where to save the model (reused when it holds one)")
    parser.add_argument("--tasks", type=int, default=48, help="tasks per environment the oracle plays (default: %(default)s)")
    parser.add_argument("--train-every", type=int, default=4,
                        help="warm up on the tasks i with i %% N != N-1 (1: all) (default: %(default)s)")  # fmt: skip
    parser.add_argument("--steps", type=int, default=250, help="SFT steps (default: %(default)s)")
    parser.add_argument("--lr", type=float, default=1e-2, help="SFT learning rate, decayed to 0 (default: %(default)s)")
    parser.add_argument("--batch", type=int, default=8, help="episodes per SFT step (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default: %(default)s)")
    args = parser.parse_args()
    summary = build(args.folder, tasks=args.tasks, train_every=args.train_every, steps=args.steps, lr=args.lr,
                    batch=args.batch, seed=args.seed, threads=args.threads)  # fmt: skip
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
