"""One episode of the built-in agent in the terminal environment, its model calls answered by a policy.

    .venv-trainers/bin/python examples/agents/builtin_agent_intercepted.py                 # tiny model, local server
    .venv-trainers/bin/python examples/agents/builtin_agent_intercepted.py --model smollm2 --image openenv-terminal:latest

The agent runs in the environment's sandbox (a local `openenv serve`, or the image's container on
the SDK's internal network); every chat completion it asks for is intercepted on this host,
sampled from the policy with token ids and logprobs, and recorded. The script prints the
agent's turns, its run report, the host-side reward, and each training row's token counts, and
checks the recorded logprobs against a forward pass of the model.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
from openenv_trainers.generation import TransformersBackend
from openenv_trainers.generation.base import SamplingParams
from openenv_trainers.intercept import (
    AgentEpisodeConfig,
    InterceptionServer,
    run_agent_episode,
)
from openenv_trainers.sources import load_grader
from rich.console import Console
from rich.table import Table

from openenv_sdk.agents import BUILTIN_AGENT
from openenv_sdk.client import AsyncGenericEnvClient

REPO = Path(__file__).resolve().parents[2]
TERMINAL = REPO / "environments" / "terminal"


def load_policy(name: str) -> tuple[object, object]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if name == "smollm2":
        from openenv_trainers.smollm import load_smollm2

        return load_smollm2()
    from openenv_trainers.tiny_model import build_tiny_model

    folder = Path(os.environ.get("OPENENV_TRAINERS_TINY_MODEL", "/tmp/openenv-tiny-model"))
    if not (folder / "config.json").is_file():
        build_tiny_model(folder)
    return AutoModelForCausalLM.from_pretrained(folder).eval(), AutoTokenizer.from_pretrained(folder)


async def episode(args: argparse.Namespace, model: object, tokenizer: object, console: Console) -> None:
    backend = TransformersBackend(model, pad_token_id=tokenizer.pad_token_id or tokenizer.eos_token_id)
    spec = BUILTIN_AGENT.model_copy(update={"env": {"OPENENV_AGENT_MAX_TURNS": str(args.max_turns)}})
    config = AgentEpisodeConfig(agent=spec, sampling=SamplingParams(max_tokens=args.max_tokens, temperature=args.temperature))
    where = {"image": args.image, "startup_timeout_s": 120} if args.image else {"env_dir": TERMINAL}
    # A container reaches this host at its network's gateway: listen on every interface then.
    with InterceptionServer(host="0.0.0.0" if args.image else "127.0.0.1") as server:
        async with AsyncGenericEnvClient(**where, timeout_s=60) as env:
            started = time.monotonic()
            result = await run_agent_episode(
                env, backend, tokenizer, server=server, task={"task_id": args.task}, rubric=load_grader(TERMINAL), config=config, seed=args.seed
            )
            elapsed = time.monotonic() - started
    run = result.agent_run
    console.rule(f"{args.task} in {'the container ' + args.image if args.image else 'a local server'}")
    console.print(run.stdout_tail if run else "(no report)", markup=False)
    console.print(f"agent exit {run.exit_code if run else '?'}, timed out: {run.timed_out if run else '?'}; "
                  f"{result.model_calls} model calls, {len(result.segments)} row(s); reward {result.reward}; {elapsed:.1f} s")
    table = Table("row", "model calls", "prompt tokens", "completion tokens", "sampled (mask 1)", "max |logprob diff|")
    worst = 0.0
    for i, segment in enumerate(result.segments):
        ids = torch.tensor(segment.input_ids)
        with torch.no_grad():
            logits = model(ids[None]).logits[0, :-1].float() / args.temperature
        recomputed = logits.log_softmax(-1)[torch.arange(len(ids) - 1), ids[1:]]
        start = len(segment.prompt_ids)
        diffs = [
            abs(segment.completion_logprobs[j] - recomputed[start + j - 1].item())
            for j, m in enumerate(segment.completion_mask)
            if m
        ]
        assert not any(math.isnan(d) for d in diffs)
        worst = max([worst, *diffs])
        table.add_row(str(i), str(segment.model_calls), str(start), str(len(segment.completion_ids)), str(sum(segment.completion_mask)), f"{max(diffs):.2e}")
    console.print(table)
    if worst > 1e-3:
        console.print(f"[red]recorded logprobs differ from a forward pass by {worst:.2e}[/red]")
        sys.exit(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=["tiny", "smollm2"], default="tiny")
    parser.add_argument("--image", help="run the environment's image (e.g. openenv-terminal:latest) instead of a local server")
    parser.add_argument("--task", default="clean_tmp_files")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-turns", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--temperature", type=float, default=0.7)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    console = Console()
    with console.status(f"loading the {args.model} model"):
        model, tokenizer = load_policy(args.model)
    asyncio.run(episode(args, model, tokenizer, console))


if __name__ == "__main__":
    main()
