"""Summarise a run.json of async_grpo_guess.py: the figures for docs/training.md and the plots.

    python scripts/gpu/plot_run.py run.json docs/img/async_grpo_guess_reward.png [docs/img/..._mismatch.png]
    python scripts/gpu/plot_run.py --compare A.json B.json [...] docs/img/compare.png   # e.g. IS on vs off

The second figure of a run: the sampler-trainer mismatch per step (`logprob_diff` mean and max, the
importance-sampling ratio) and generation against what was dropped as stale (pacing).
`--compare` puts several runs side by side: reward (moving average), mismatch, stale fraction.
"""

from __future__ import annotations

import json
import math
import statistics
import sys


def summarise(run: dict) -> dict:
    logs = [s for s in run["steps"] if "logs" in s]
    marks = [s for s in run["steps"] if "logs" not in s]
    per_step = {}
    for s in logs:
        per_step.setdefault(s["step"], {}).update(s["logs"])
    steps = sorted(per_step)
    reward_key = "reward" if any("reward" in per_step[k] for k in steps) else "worker/reward_mean"
    rewards = [(k, per_step[k][reward_key]) for k in steps if reward_key in per_step[k]]
    step_times = [b["t"] - a["t"] for a, b in zip(marks, marks[1:])]
    episodes = marks[-1]["episodes"] - marks[0]["episodes"] if len(marks) > 1 else 0
    toks = marks[-1]["sampled_tokens"] - marks[0]["sampled_tokens"] if len(marks) > 1 else 0
    span = marks[-1]["t"] - marks[0]["t"] if len(marks) > 1 else float("nan")
    totals = run["totals"]
    syncs = run["sync_timings"]
    out = {
        "reward_key": reward_key,
        "rewards": rewards,
        "steps": len(marks),
        "train_s": run["train_s"],
        "step_time_mean_s": statistics.mean(step_times) if step_times else math.nan,
        "step_time_median_s": statistics.median(step_times) if step_times else math.nan,
        "episodes_per_s": episodes / span if span else math.nan,
        "sampled_tokens_per_s": toks / span if span else math.nan,
        "episodes_total": totals["episodes"],
        "sampled_tokens_total": run["sampled_tokens"],
        "env_share_of_episode_time": totals["env_s"] / totals["episode_s"] if totals["episode_s"] else math.nan,
        "env_s_per_step": (marks[-1]["env_s"] - marks[0]["env_s"]) / max(len(marks) - 1, 1) if len(marks) > 1 else math.nan,
        "sync": {k: statistics.median([t[k] for t in syncs if k in t]) for k in (syncs[0] if syncs else {})},
        "sync_n": len(syncs),
        "probes": run["probes"],
        "worker_counters": run["worker_counters"],
        # pacing and the mismatch (runs from before they were recorded lack these)
        "generated": run.get("generated"),
        "dropped_stale": run.get("dropped_stale"),
        "stale_fraction": run.get("stale_fraction"),
        "admitted_groups": run.get("admitted_groups"),
        "paused_s": run.get("paused_s"),
        "trainer_wait_s": run.get("trainer_wait_s"),
        "logprob_diff_mean": run.get("logprob_diff_mean"),
        "logprob_diff_max": run.get("logprob_diff_max"),
        "is_correction": run["args"].get("is_correction"),
        "pacing_on": run["args"].get("pacing"),
    }
    for key in ("kl", "ratio", "perf/weight_sync_s", "entropy", "perf/rollout_wait_s", "perf/step_s",
                "sampling/importance_sampling_ratio/mean", "sampling/is_masked_frac", "sample/staleness_mean"):
        vals = [per_step[k][key] for k in steps if key in per_step[k]]
        if vals:
            out[f"{key}_mean"] = statistics.mean(vals)
    return out


def episode_bins(run: dict, width_s: float = 30.0) -> list[dict]:
    """All finished episodes (trained or not), binned by when they finished: mean reward, solved rate, turns."""
    bins: dict[int, list[dict]] = {}
    for e in run["episodes"]:
        bins.setdefault(int(e["t"] // width_s), []).append(e)
    out = []
    for b, eps in sorted(bins.items()):
        rewards = [e["reward"] for e in eps]
        out.append({
            "t0": b * width_s, "t1": min((b + 1) * width_s, max(e["t"] for e in eps)), "episodes": len(eps),
            "reward": statistics.mean(rewards),
            "reward_sem": statistics.pstdev(rewards) / math.sqrt(len(rewards)),
            "solved": statistics.mean(1.0 if e["solved"] > 0 else 0.0 for e in eps),
            "turns": statistics.mean(e["turns"] for e in eps),
        })
    return out


def plot(run: dict, summary: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10, 3.6), dpi=120)
    xs = [k for k, _ in summary["rewards"]]
    ys = [v for _, v in summary["rewards"]]
    ax.plot(xs, ys, marker="o", ms=3, lw=1, label="trained samples of the step")
    if len(ys) >= 5:
        ma = [statistics.mean(ys[max(0, i - 4): i + 1]) for i in range(len(ys))]
        ax.plot(xs, ma, lw=2, label="moving average (5 steps)")
    ax.set_xlabel("AsyncGRPOTrainer step")
    ax.set_ylabel("mean reward (host-side grader)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    bins = episode_bins(run)
    mid = [(b["t0"] + b["t1"]) / 2 for b in bins]
    bx.errorbar(mid, [b["reward"] for b in bins], yerr=[b["reward_sem"] for b in bins], marker="o", ms=3,
                capsize=2, label="mean reward")
    bx.plot(mid, [b["solved"] for b in bins], marker="s", ms=3, lw=1, label="share solved")
    bx.set_xlabel("seconds of training (all finished episodes, 30 s bins)")
    bx.grid(alpha=0.3)
    bx.legend(fontsize=8)
    gpu = run["versions"].get("gpu", "")
    fig.suptitle(f"SmolLM2-135M on the guessing game: AsyncGRPOTrainer + EnvRolloutWorker + vLLM 0.26, one {gpu}",
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(path)


def per_step(run: dict, key: str) -> list[tuple[int, float]]:
    """(step, value) of one logged key, in step order."""
    out: dict[int, float] = {}
    for s in run["steps"]:
        value = s.get("logs", {}).get(key)
        if value is not None and not (isinstance(value, float) and math.isnan(value)):
            out[s["step"]] = value
    return sorted(out.items())


def plot_mismatch(run: dict, path: str) -> None:
    """The mismatch per step, and generation against stale drops (cumulative, as the worker logs them)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10, 3.6), dpi=120)
    for key, style in (("logprob_diff/mean", "o-"), ("logprob_diff/max", "s--")):
        points = per_step(run, key)
        if points:
            ax.plot([k for k, _ in points], [v for _, v in points], style, ms=3, lw=1, label=key)
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("|trainer - sampler| logprob (nats)")
    ratio = per_step(run, "sampling/importance_sampling_ratio/mean")
    if ratio:
        rx = ax.twinx()
        rx.plot([k for k, _ in ratio], [v for _, v in ratio], color="gray", lw=1, label="IS ratio (mean)")
        rx.set_ylabel("IS ratio (mean)", color="gray")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    for key, label in (("worker/generated", "generated"), ("worker/dropped_stale", "dropped as stale (worker)")):
        points = per_step(run, key)
        if points:
            bx.plot([k for k, _ in points], [v for _, v in points], marker="o", ms=3, lw=1, label=label)
    bx.set_xlabel("step")
    bx.set_ylabel("samples (cumulative)")
    bx.grid(alpha=0.3)
    bx.legend(fontsize=8)
    args = run["args"]
    fig.suptitle(
        f"mismatch and staleness: pacing {args.get('pacing', '?')}, IS correction {args.get('is_correction', '?')} "
        f"({args.get('is_mode', '')}), stale fraction {run.get('stale_fraction')}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path)


def plot_compare(runs: list[tuple[str, dict]], path: str) -> None:
    """Several runs side by side: reward (5-step moving average), mean mismatch, stale fraction."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, bx, cx) = plt.subplots(1, 3, figsize=(13, 3.6), dpi=120)
    names, fractions = [], []
    for name, run in runs:
        summary = summarise(run)
        xs = [k for k, _ in summary["rewards"]]
        ys = [v for _, v in summary["rewards"]]
        ma = [statistics.mean(ys[max(0, i - 4): i + 1]) for i in range(len(ys))]
        ax.plot(xs, ma, lw=2, label=name)
        points = per_step(run, "logprob_diff/mean")
        bx.plot([k for k, _ in points], [v for _, v in points], marker="o", ms=3, lw=1, label=name)
        names.append(name)
        fractions.append(run.get("stale_fraction") or 0.0)
    ax.set_xlabel("step")
    ax.set_ylabel("reward (5-step moving average)")
    bx.set_xlabel("step")
    bx.set_ylabel("logprob_diff/mean (nats)")
    bx.set_yscale("log")
    cx.bar(names, fractions)
    cx.set_ylabel("dropped as stale / generated")
    for a in (ax, bx):
        a.grid(alpha=0.3)
        a.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)


def _label(run: dict, path: str) -> str:
    args = run["args"]
    return f"pacing {args.get('pacing', '?')}, IS {args.get('is_correction', '?')} ({path.rsplit('/', 2)[-2] if '/' in path else path})"


if __name__ == "__main__":
    if sys.argv[1] == "--compare":
        *paths, out_png = sys.argv[2:]
        loaded = [(p, json.load(open(p))) for p in paths]
        for p, run in loaded:
            summary = summarise(run)
            print(p, {k: summary[k] for k in ("stale_fraction", "generated", "dropped_stale", "trainer_wait_s",
                                             "logprob_diff_mean", "logprob_diff_max", "is_correction", "pacing_on")})
        plot_compare([(_label(run, p), run) for p, run in loaded], out_png)
        sys.exit(0)
    run = json.load(open(sys.argv[1]))
    summary = summarise(run)
    print(json.dumps({k: v for k, v in summary.items() if k != "rewards"}, indent=1, default=str))
    print("rewards:", [(k, round(v, 3)) for k, v in summary["rewards"]])
    for b in episode_bins(run):
        print({k: round(v, 3) for k, v in b.items()})
    if len(sys.argv) > 2:
        plot(run, summary, sys.argv[2])
    if len(sys.argv) > 3:
        plot_mismatch(run, sys.argv[3])
