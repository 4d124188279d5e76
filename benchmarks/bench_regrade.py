"""Regrading kept episodes against replaying them: what `openenv regrade` saves.

    python benchmarks/bench_regrade.py --model-url http://127.0.0.1:8011/v1 [--envs terminal,coding,mini_swe] [--json]
    python benchmarks/bench_regrade.py --scripted [--envs wordle,terminal,coding,mini_swe] [--model-turn-s 1.0]

With a model (`--model-url`, an OpenAI-compatible endpoint; `benchmarks/smollm_chat_server.py`
serves SmolLM2-135M-Instruct on the CPU): for each environment a run is recorded with the model
and `--keep-state` (the episodes regraded are the model's own), then the same episodes are
scored again, each way timed from start to finish (the server's start included):

* regrade: `aregrade` over the kept states; no model, no tool call; a fresh session with the
  workspace restored where the grader calls into the environment;
* replay (model): the episodes run again as `openenv eval` runs them: the model called for every
  assistant turn (greedy, as recorded), every tool call made, graded;
* replay (environment only): the recorded assistant turns sent back at once, every tool call
  made again, graded: the least any replay can cost (a lower bound, not a replay of the issue's
  kind, which calls the model).

`--scripted` records with the tests' scripted policies instead (the reference on even attempts,
a wrong or empty answer on odd ones) and times a replay whose turns each take `--model-turn-s`
(the policy sleeps: a stand-in for a model, not a model).

Same rewards for regrade and the environment-only replay is asserted; the model's replay is
reported with how many of its rewards matched (greedy decoding on one CPU is repeatable, but a
replay is not bound to be). Printed side by side, with the ratios, and where regrading's time
went (per-phase sums over the episodes).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from openenv_sdk.episode_config import EpisodeConfig  # noqa: E402
from openenv_sdk.evaluation import (  # noqa: E402
    EPISODES_FILE,
    ChatPolicy,
    EnvTarget,
    EpisodeLog,
    PolicyTurn,
    RunConfig,
    TurnContext,
    arun,
    load_policy,
)
from openenv_sdk.regrade import StateKeeper, StateStore, aregrade  # noqa: E402

PLANS: dict[str, tuple[str, list[str]]] = {
    # env: (the scripted recording policy, its tasks); 2 rollouts each
    "wordle": ("wordle_act", [str(1000 + i) for i in range(20)]),
    "terminal": ("terminal_act", ["count_log_files", "csv2json", "crlf_to_lf", "greet_script", "git_revert",
                                  "fix_fibonacci", "stats_py", "clean_tmp_files"]),
    "coding": ("coding_act", ["fizzbuzz", "anagrams", "caesar", "chunk", "binary_search", "balanced_brackets"]),
    "mini_swe": ("mini_swe_act", ["intervals-1", "datekit-1", "pagekit-1", "querystr-1", "toktext-1", "moneyfmt-1"]),
}  # fmt: skip
MODEL_TASKS: dict[str, list[str]] = {
    # a model on a shared 2-core CPU answers a turn in tens of seconds: one task, 2 episodes each
    "wordle": ["1000"],
    "terminal": ["csv2json"],
    "coding": ["fizzbuzz"],
    "mini_swe": ["intervals-1"],
}
ROLLOUTS = 2
CONCURRENCY = 8


class ReplayPolicy:
    """The recorded run's assistant turns, in order, each after `turn_s` seconds."""

    def __init__(self, run: Path, *, turn_s: float) -> None:
        self.turns = {
            key: [m for m in record.messages if m.get("role") == "assistant"]
            for key, record in EpisodeLog(run / EPISODES_FILE).load().items()
        }
        self.turn_s = turn_s
        self.name = "replay"

    async def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], context: TurnContext) -> PolicyTurn:
        if self.turn_s:
            await asyncio.sleep(self.turn_s)
        return PolicyTurn(message=dict(self.turns[context.key][context.turn]))

    async def aclose(self) -> None:
        return None


async def play(
    env: str, out: Path, policy: Any, tasks: list[str], *, keep: bool, episode: EpisodeConfig | None = None
) -> tuple[float, dict[str, float | None]]:
    folder = str(REPO / "environments" / env)
    target = EnvTarget(folder)
    keeper = StateKeeper(StateStore(out), env=folder) if keep else None
    started = time.monotonic()
    try:
        result = await arun(target, policy, output=out, task_ids=tasks, rollouts=ROLLOUTS, resume=False, episode=episode,
                            run=RunConfig(concurrency=CONCURRENCY, keep=keeper), model=getattr(policy, "name", "bench"))  # fmt: skip
    finally:
        await target.stop()
    elapsed = time.monotonic() - started
    errors = [r.error for r in result.records if r.error]
    if errors:
        raise SystemExit(f"{env}: {len(errors)} episode(s) failed, e.g. {errors[0]}")
    return elapsed, {r.key: r.reward for r in result.records}


async def timed_regrade(env: str, recorded: Path, rewards: dict[str, float | None]) -> tuple[float, Any]:
    started = time.monotonic()
    regraded = await aregrade(recorded, concurrency=CONCURRENCY)
    elapsed = time.monotonic() - started
    assert {r.key: r.reward for r in regraded.episodes} == rewards, f"{env}: regrade changed a score"
    return elapsed, regraded


def _turns(recorded: Path) -> int:
    return sum(len(t) for t in ReplayPolicy(recorded, turn_s=0).turns.values())


def _phases(regraded: Any) -> dict[str, float]:
    return {"server_start": regraded.server_start_s, **regraded.phases_s()}


async def bench_scripted(env: str, root: Path, model_turn_s: float) -> dict[str, Any]:
    policy_name, tasks = PLANS[env]
    recorded = root / f"{env}-recorded"
    _, rewards = await play(env, recorded, load_policy(f"scripted:tests.regrade.policies:{policy_name}"), tasks, keep=True)
    regrade_s, regraded = await timed_regrade(env, recorded, rewards)
    replay_s, replayed = await play(env, root / f"{env}-replay", ReplayPolicy(recorded, turn_s=0.0), tasks, keep=False)
    assert replayed == rewards, "the replay changed a score"
    model_s, _ = await play(env, root / f"{env}-model", ReplayPolicy(recorded, turn_s=model_turn_s), tasks, keep=False)
    return {
        "env": env,
        "policy": f"scripted (tests.regrade.policies:{policy_name}); replay turns sleep {model_turn_s:g} s",
        "episodes": len(rewards),
        "assistant_turns": _turns(recorded),
        "regrade_s": regrade_s,
        "restored_sessions": regraded.sessions,
        "regrade_phases_s": _phases(regraded),
        "replay_env_only_s": replay_s,
        "replay_with_model_s": model_s,
        "model_turn_s": model_turn_s,
        "speedup_env_only": replay_s / regrade_s,
        "speedup_with_model": model_s / regrade_s,
    }


async def bench_model(env: str, root: Path, base_url: str, model: str, *, max_turns: int, max_tokens: int) -> dict[str, Any]:
    tasks = MODEL_TASKS[env]
    episode = EpisodeConfig(max_turns=max_turns)

    def policy() -> ChatPolicy:
        return ChatPolicy(base_url=base_url, model=model, params={"temperature": 0.0, "max_tokens": max_tokens}, timeout_s=600)

    recorded = root / f"{env}-model-recorded"
    record_s, rewards = await play(env, recorded, policy(), tasks, keep=True, episode=episode)
    regrade_s, regraded = await timed_regrade(env, recorded, rewards)
    replay_s, replayed = await play(env, root / f"{env}-replay", ReplayPolicy(recorded, turn_s=0.0), tasks, keep=False,
                                    episode=episode)  # fmt: skip
    assert replayed == rewards, f"{env}: the environment-only replay changed a score"
    model_s, remodelled = await play(env, root / f"{env}-model-replay", policy(), tasks, keep=False, episode=episode)
    records = EpisodeLog(recorded / EPISODES_FILE).load().values()
    return {
        "env": env,
        "policy": f"{model} at {base_url} (greedy, max_tokens {max_tokens}, max_turns {max_turns})",
        "episodes": len(rewards),
        "assistant_turns": _turns(recorded),
        "tool_calls": sum(len(m.get("tool_calls") or []) for r in records for m in r.messages if m.get("role") == "assistant"),
        "rewards": rewards,
        "record_s": record_s,
        "regrade_s": regrade_s,
        "restored_sessions": regraded.sessions,
        "regrade_phases_s": _phases(regraded),
        "replay_env_only_s": replay_s,
        "replay_with_model_s": model_s,
        "replay_rewards_matched": sum(remodelled.get(k) == v for k, v in rewards.items()),
        "speedup_env_only": replay_s / regrade_s,
        "speedup_with_model": model_s / regrade_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", default="terminal,coding,mini_swe")
    parser.add_argument("--model-url", default=None, help="An OpenAI-compatible endpoint (…/v1): record and replay with it.")
    parser.add_argument("--model", default="smollm2", help="The model id sent to --model-url.")
    parser.add_argument("--max-turns", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--scripted", action="store_true", help="Record with the scripted policies instead.")
    parser.add_argument("--model-turn-s", type=float, default=1.0, help="--scripted: seconds each replayed turn sleeps.")
    parser.add_argument("--output", default=None, help="Also write the rows here as JSON.")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if not args.scripted and not args.model_url:
        parser.error("give --model-url (a real model) or --scripted")
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-regrade-") as tmp:
        for env in args.envs.split(","):
            if args.scripted:
                row = asyncio.run(bench_scripted(env, Path(tmp), args.model_turn_s))
            else:
                row = asyncio.run(bench_model(env, Path(tmp), args.model_url, args.model,
                                              max_turns=args.max_turns, max_tokens=args.max_tokens))  # fmt: skip
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    if args.output:
        Path(args.output).write_text(json.dumps(rows, indent=2) + "\n")
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    replay = "replay (model)" if not args.scripted else f"replay (sleep {args.model_turn_s:g} s/turn)"
    table = Table(title="regrade vs replay (same episodes; 8 at a time)")
    for column in ("env", "episodes", "turns", "regrade", replay, "×", "replay (env only)", "×"):
        table.add_column(column, justify="left" if column == "env" else "right")
    for r in rows:
        table.add_row(r["env"], str(r["episodes"]), str(r["assistant_turns"]), f"{r['regrade_s']:.2f} s",
                      f"{r['replay_with_model_s']:.2f} s", f"{r['speedup_with_model']:.1f}",
                      f"{r['replay_env_only_s']:.2f} s", f"{r['speedup_env_only']:.1f}")  # fmt: skip
    Console().print(table)


if __name__ == "__main__":
    main()
