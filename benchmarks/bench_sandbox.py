"""Sandbox cost: the latency one isolated command adds, beside the unisolated runner.

    python benchmarks/bench_sandbox.py [--runs 200] [--json] [--write-docs]

Each round runs the same command four ways, interleaved in a new random order each round, so that
machine noise and ordering effects hit all alike:

* `run_command`: the unisolated runner (what every agent command used before `Sandbox`): a
  new session, rlimits, the switch to an unprivileged user when root;
* `Sandbox.run`: the same limits, in bubblewrap (pid, mount, network, IPC, UTS namespaces, the
  session's own uid; as root, privileged bwrap then setpriv), under the seccomp filter, in the
  session's cgroup, its folder a bounded tmpfs;
* `Sandbox.run` without the session bounds (no cgroup, no tmpfs; the filter stays): what the
  cgroup join and the bounds' bookkeeping add, measured beside it;
* `subprocess.run`: a bare fork and exec, for scale.

Commands: `true`, and `python3 -c pass` (an interpreter start, what most agent commands pay).
The target is an added median under 10 ms for `true`. `--write-docs` replaces the "Sandbox"
section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

from rich.console import Console
from rich.progress import track
from rich.table import Table

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from _docs import write_marked_section  # noqa: E402

from openenv_sdk.sandbox import Sandbox, SandboxLimits, isolation_report, run_command  # noqa: E402

COMMANDS = {"true": ["/bin/true"], "python3 -c pass": ["python3", "-c", "pass"]}
TARGET_MS = 10.0
ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}  # the same for the three ways


def measure(runs: int) -> dict[str, dict[str, list[float]]]:
    limits = SandboxLimits(timeout_s=30)
    unbounded = limits.model_copy(
        update={"session_memory_bytes": None, "session_max_processes": None, "workspace_bytes": None, "workspace_inodes": None}
    )
    ways_names = ("bare", "unisolated", "sandbox", "sandbox_unbounded")
    samples: dict[str, dict[str, list[float]]] = {name: {way: [] for way in ways_names} for name in COMMANDS}
    with Sandbox(limits=limits, name="bench") as sandbox, Sandbox(limits=unbounded, name="bench-unbounded") as plain:
        work = sandbox.workspace
        ways = {
            "bare": lambda argv: subprocess.run(argv, cwd=work, env=ENV, capture_output=True, check=False),
            "unisolated": lambda argv: run_command(argv, cwd=work, limits=limits, env=ENV),
            "sandbox": lambda argv: sandbox.run(argv, env=ENV),
            "sandbox_unbounded": lambda argv: plain.run(argv, env=ENV),
        }
        for name, argv in COMMANDS.items():
            for way in ways.values():  # warm caches once
                way(argv)
            order = list(ways.items())
            shuffle = random.Random(0)
            for _ in track(range(runs), description=f"{name:<16}"):
                # a new order each round: no way always follows the same one (a kernel state one
                # way leaves, such as the cgroup lock's, would otherwise favour the next)
                shuffle.shuffle(order)
                for way_name, way in order:
                    started = time.perf_counter()
                    way(argv)
                    samples[name][way_name].append((time.perf_counter() - started) * 1000)
    return samples


def summarize(samples: dict[str, dict[str, list[float]]]) -> dict[str, dict[str, float]]:
    out = {}
    for name, ways in samples.items():
        row = {f"{way}_median_ms": statistics.median(values) for way, values in ways.items()}
        row.update({f"{way}_p99_ms": sorted(values)[max(0, int(len(values) * 0.99) - 1)] for way, values in ways.items()})
        row["added_median_ms"] = row["sandbox_median_ms"] - row["unisolated_median_ms"]
        row["bounds_added_median_ms"] = row["sandbox_median_ms"] - row["sandbox_unbounded_median_ms"]
        out[name] = row
    return out


def markdown(summary: dict[str, dict[str, float]], runs: int) -> str:
    iso = isolation_report()
    load = os.getloadavg()[0]
    memory = str(iso.get("session_memory", "n/a")).split(" (")[0]  # not the server's cgroup path
    lines = [
        "## Sandbox",
        "",
        f"`python benchmarks/bench_sandbox.py --runs {runs}` ({date.today()}, {platform.machine()}, "
        f"{os.cpu_count()} cores, load {load:.1f}, Python {platform.python_version()}, isolation: {iso['mode']}; "
        f"seccomp filter; session memory: {memory}; workspace: {iso.get('workspace', 'n/a')}). "
        f"Median (p99) wall time of one command from the caller, in ms, the four ways interleaved in random order. Target: the "
        f"sandbox adds under {TARGET_MS:g} ms to `true`.",
        "",
        "The same on a cgroup v2 host, with the sandbox before the filter and the bounds as a baseline: "
        "`benchmarks/results/sandbox_cgroup_v2_host.md`.",
        "",
        "| command | bare fork+exec | `run_command` (before) | `Sandbox.run` without session bounds | "
        "`Sandbox.run` (now) | added by the sandbox | of which the session bounds |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, row in summary.items():
        lines.append(
            f"| `{name}` | {row['bare_median_ms']:.1f} ({row['bare_p99_ms']:.1f}) | "
            f"{row['unisolated_median_ms']:.1f} ({row['unisolated_p99_ms']:.1f}) | "
            f"{row['sandbox_unbounded_median_ms']:.1f} ({row['sandbox_unbounded_p99_ms']:.1f}) | "
            f"{row['sandbox_median_ms']:.1f} ({row['sandbox_p99_ms']:.1f}) | {row['added_median_ms']:+.1f} | "
            f"{row['bounds_added_median_ms']:+.1f} |"
        )
    return "\n".join(lines) + "\n"


BEGIN, END = "<!-- bench_sandbox: begin -->", "<!-- bench_sandbox: end -->"


def write_docs(section: str) -> None:
    # between markers: bench_echo.py --write-docs rewrites the page and keeps marked sections
    write_marked_section(REPO / "docs" / "benchmarks.md", BEGIN, END, f"{BEGIN}\n{section.rstrip()}\n{END}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument("--write-docs", action="store_true", help="update docs/benchmarks.md")
    args = parser.parse_args()
    summary = summarize(measure(args.runs))
    if args.json:
        print(json.dumps(summary, indent=1))
        return
    table = Table(title=f"One command, median (p99) ms over {args.runs} runs")
    for column in ("command", "bare", "run_command (before)", "Sandbox.run unbounded", "Sandbox.run (now)", "added", "bounds"):
        table.add_column(column, justify="right")
    for name, row in summary.items():
        table.add_row(
            name,
            f"{row['bare_median_ms']:.1f} ({row['bare_p99_ms']:.1f})",
            f"{row['unisolated_median_ms']:.1f} ({row['unisolated_p99_ms']:.1f})",
            f"{row['sandbox_unbounded_median_ms']:.1f} ({row['sandbox_unbounded_p99_ms']:.1f})",
            f"{row['sandbox_median_ms']:.1f} ({row['sandbox_p99_ms']:.1f})",
            f"{row['added_median_ms']:+.1f}",
            f"{row['bounds_added_median_ms']:+.1f}",
        )
    Console().print(table)
    added = summary["true"]["added_median_ms"]
    print(f"added median for `true`: {added:.1f} ms (target < {TARGET_MS:g} ms: {'met' if added < TARGET_MS else 'NOT met'})")
    if args.write_docs:
        write_docs(markdown(summary, args.runs))


if __name__ == "__main__":
    main()
