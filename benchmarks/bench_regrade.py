"""Regrading kept episodes against replaying them: what `openenv regrade` saves.

    python benchmarks/bench_regrade.py [--envs wordle,terminal,coding] [--model-turn-s 1.0] [--json]

For each environment: a run is recorded with `--keep-state` (its scripted policy: the reference
on even attempts, a wrong or empty answer on odd ones, so both rewards are there), then the same
episodes are scored again two ways, each timed from start to finish (the server's start
included, 8 episodes at a time):

* regrade: `aregrade` over the kept states; no policy, no tool call; a fresh session with the
  workspace restored only where the grader calls into the environment;
* replay: the episodes played again (`arun`), the recorded assistant turns sent back in order,
  every tool call made again, then graded: the environment's whole share of an episode; and the
  same with each assistant turn taking `--model-turn-s` seconds (a model's answer; the policy
  sleeps that long, so overlapping episodes overlap their waits as real requests do).

Same rewards both ways is asserted. Printed side by side, with the ratios.
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

from openenv_sdk.evaluation import (  # noqa: E402
    EPISODES_FILE,
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
    # env: (the recording policy, its tasks)
    "wordle": ("wordle_act", [str(1000 + i) for i in range(20)]),
    "terminal": ("terminal_act", ["count_log_files", "csv2json", "crlf_to_lf", "greet_script", "git_revert",
                                  "fix_fibonacci", "stats_py", "clean_tmp_files"]),
    "coding": ("coding_act", ["fizzbuzz", "anagrams", "caesar", "chunk", "binary_search", "balanced_brackets"]),
}  # fmt: skip
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


async def play(env: str, out: Path, policy: Any, tasks: list[str], *, keep: bool) -> tuple[float, dict[str, float | None]]:
    folder = str(REPO / "environments" / env)
    target = EnvTarget(folder)
    keeper = StateKeeper(StateStore(out), env=folder) if keep else None
    started = time.monotonic()
    try:
        result = await arun(target, policy, output=out, task_ids=tasks, rollouts=ROLLOUTS, resume=False,
                            run=RunConfig(concurrency=CONCURRENCY, keep=keeper), model="bench")  # fmt: skip
    finally:
        await target.stop()
    elapsed = time.monotonic() - started
    errors = [r.error for r in result.records if r.error]
    if errors:
        raise SystemExit(f"{env}: {len(errors)} episode(s) failed, e.g. {errors[0]}")
    return elapsed, {r.key: r.reward for r in result.records}


async def bench(env: str, root: Path, model_turn_s: float) -> dict[str, Any]:
    policy_name, tasks = PLANS[env]
    recorded = root / f"{env}-recorded"
    _, rewards = await play(env, recorded, load_policy(f"scripted:tests.regrade.policies:{policy_name}"), tasks, keep=True)

    started = time.monotonic()
    regraded = await aregrade(recorded, concurrency=CONCURRENCY)
    regrade_s = time.monotonic() - started
    assert {r.key: r.reward for r in regraded.episodes} == rewards, "regrade changed a score"

    replay_s, replayed = await play(env, root / f"{env}-replay", ReplayPolicy(recorded, turn_s=0.0), tasks, keep=False)
    assert replayed == rewards, "the replay changed a score"
    model_s, _ = await play(env, root / f"{env}-model", ReplayPolicy(recorded, turn_s=model_turn_s), tasks, keep=False)
    turns = sum(len(t) for t in ReplayPolicy(recorded, turn_s=0).turns.values())
    return {
        "env": env,
        "episodes": len(rewards),
        "assistant_turns": turns,
        "regrade_s": regrade_s,
        "restored_sessions": regraded.sessions,
        "replay_env_only_s": replay_s,
        "replay_with_model_s": model_s,
        "model_turn_s": model_turn_s,
        "speedup_env_only": replay_s / regrade_s,
        "speedup_with_model": model_s / regrade_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", default="wordle,terminal,coding")
    parser.add_argument("--model-turn-s", type=float, default=1.0, help="Seconds a model takes per assistant turn.")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-regrade-") as tmp:
        for env in args.envs.split(","):
            rows.append(asyncio.run(bench(env, Path(tmp), args.model_turn_s)))
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    table = Table(title="regrade vs replay (same episodes, same rewards; 8 at a time)")
    for column in ("env", "episodes", "turns", "regrade", "replay (env only)", "×", f"replay (model {args.model_turn_s:g} s/turn)", "×"):
        table.add_column(column, justify="left" if column == "env" else "right")
    for r in rows:
        table.add_row(r["env"], str(r["episodes"]), str(r["assistant_turns"]), f"{r['regrade_s']:.2f} s",
                      f"{r['replay_env_only_s']:.2f} s", f"{r['speedup_env_only']:.1f}",
                      f"{r['replay_with_model_s']:.2f} s", f"{r['speedup_with_model']:.1f}")  # fmt: skip
    Console().print(table)


if __name__ == "__main__":
    main()
