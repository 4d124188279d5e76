"""Per-environment figures: a tool call, a grading, and concurrent episodes in one server.

    python benchmarks/bench_environments.py                      # every catalog environment, images
    python benchmarks/bench_environments.py --mode local         # `openenv serve` processes, no engine
    python benchmarks/bench_environments.py --envs coding,terminal --write-docs

For each environment: the median (and p90) of a cheap agent tool call over MCP, the median of a
host-side grading of a do-nothing attempt (the hidden tests/checks still run in full), and the
largest number of concurrent episodes one server (one container in image mode) holds with every
episode's reset and tool call succeeding, doubling from 1 up to `--max-concurrency`.
Image mode needs a container engine and built images (`openenv build --all`).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from openenv_sdk.client import GenericEnvClient  # noqa: E402
from openenv_sdk.loader import import_ref  # noqa: E402
from openenv_sdk.manifest import load_catalog, load_manifest  # noqa: E402
from openenv_sdk.rubric import grade  # noqa: E402

console = Console()


@dataclass(frozen=True)
class Probe:
    """How to poke one environment: a task, and a cheap tool call."""

    task: dict[str, Any]
    tool: str
    arguments: dict[str, Any]


PROBES: dict[str, Probe] = {
    "echo": Probe({}, "echo", {"message": "hi"}),
    "wordle": Probe({"task_id": 0}, "guess", {"word": "crane"}),
    "coding": Probe({"task_id": None}, "run_shell", {"command": "echo hi"}),
    "terminal": Probe({"task_id": "count_log_files"}, "bash", {"command": "echo hi"}),
    "mini_swe": Probe({"task_id": "datekit-1"}, "run", {"command": "echo hi"}),
}


def _first_coding_task() -> str:
    return sorted(p.stem for p in (ROOT / "environments" / "coding" / "tasks").glob("*.yaml"))[0]


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _timed(fn: Callable[[], Any], n: int) -> list[float]:
    out = []
    for _ in range(n):
        started = time.perf_counter()
        fn()
        out.append((time.perf_counter() - started) * 1000)
    return out


def measure(name: str, folder: Path, *, mode: str, calls: int, gradings: int, max_concurrency: int) -> dict[str, Any]:
    manifest = load_manifest(folder)
    probe = PROBES.get(name, Probe({}, "", {}))
    task = {k: (v if v is not None else _first_coding_task()) for k, v in probe.task.items()}
    grader = import_ref(folder, manifest.grader, what="grader")() if manifest.grader else None
    target = {"image": f"openenv-{name}:latest"} if mode == "image" else {"env_dir": folder}
    row: dict[str, Any] = {"env": name}
    started = time.perf_counter()
    with GenericEnvClient(**target, startup_timeout_s=120) as env:
        env.reset(**task)
        row["startup_s"] = time.perf_counter() - started
        if probe.tool:
            env.call_tool(probe.tool, **probe.arguments)  # warm-up
            times = _timed(lambda: env.call_tool(probe.tool, **probe.arguments), calls)
            row["tool_median_ms"], row["tool_p90_ms"] = statistics.median(times), _percentile(times, 0.9)
        if grader is not None:

            def one_grading() -> None:
                env.reset(**task)
                grade(grader, env)

            times = _timed(one_grading, gradings)
            row["grade_median_ms"] = statistics.median(times)
        # The measuring session holds one of the server's max_sessions slots.
        cap = min(max_concurrency, manifest.server.max_sessions - 1)
        row["concurrent"] = _concurrency(env.base_url, task, probe, cap)
        if cap < max_concurrency and not row["concurrent"].startswith(("0", "failed")):
            row["concurrent"] += f" (server max_sessions {manifest.server.max_sessions})"
    return row


def _concurrency(base_url: str, task: dict[str, Any], probe: Probe, cap: int) -> str:
    """Largest N (doubling) of simultaneous episodes that all reset and call a tool."""
    best = 0
    sizes = sorted({*(2**i for i in range(cap.bit_length()) if 2**i <= cap), cap})
    for n in sizes:
        clients = [GenericEnvClient(base_url, timeout_s=120) for _ in range(n)]
        try:

            def episode(client: GenericEnvClient) -> bool:
                try:
                    client.reset(**task)
                    if probe.tool:
                        result = client.call_tool(probe.tool, **probe.arguments)
                        return not result.is_error
                    return True
                except Exception:
                    return False

            with ThreadPoolExecutor(max_workers=min(n, 64)) as pool:
                ok = all(pool.map(episode, clients))
        finally:
            for client in clients:
                client.close()
        if not ok:
            return f"{best} (failed at {n})"
        best = n
    return f"{best}, all OK"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", help="comma-separated names (default: the catalog)")
    parser.add_argument("--mode", choices=["image", "local"], default="image")
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--gradings", type=int, default=5)
    parser.add_argument("--max-concurrency", type=int, default=64)
    parser.add_argument("--write-docs", action="store_true", help="write docs/benchmarks-environments.md")
    args = parser.parse_args()
    catalog = load_catalog(ROOT)
    names = args.envs.split(",") if args.envs else [e.name for e in catalog.environments]
    folders = {e.name: ROOT / e.path for e in catalog.environments}
    rows = []
    for name in names:
        console.print(f"[bold]{name}[/] ({args.mode})")
        rows.append(
            measure(
                name,
                folders[name],
                mode=args.mode,
                calls=args.calls,
                gradings=args.gradings,
                max_concurrency=args.max_concurrency,
            )
        )
    table = Table(title=f"Environments ({args.mode} mode)")
    columns = [
        ("env", "environment", "{}"),
        ("startup_s", "start + first reset (s)", "{:.2f}"),
        ("tool_median_ms", "tool call median (ms)", "{:.1f}"),
        ("tool_p90_ms", "tool call p90 (ms)", "{:.1f}"),
        ("grade_median_ms", "grading median (ms)", "{:.0f}"),
        ("concurrent", "concurrent episodes, all OK", "{}"),
    ]
    for _, title, _ in columns:
        table.add_column(title)
    lines = ["| " + " | ".join(title for _, title, _ in columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        cells = [fmt.format(row[key]) if key in row else "-" for key, _, fmt in columns]
        table.add_row(*cells)
        lines.append("| " + " | ".join(cells) + " |")
    console.print(table)
    if args.write_docs:
        load = os.getloadavg()
        doc = [
            "# Benchmarks: the environments",
            "",
            "Generated by `benchmarks/bench_environments.py --write-docs`; edit the script, not this page.",
            "",
            f"Mode: **{args.mode}** ({'one container per environment, built by `openenv build`' if args.mode == 'image' else '`openenv serve` processes'}). "
            f"Machine: {os.cpu_count()} cores, Python {platform.python_version()}, "
            f"load {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} at the end of the run, {time.strftime('%Y-%m-%d')}.",
            "",
            f"Tool call: the median of {args.calls} MCP `tools/call` of a cheap command (echo `hi`) through the "
            f"official MCP client, bound to the episode. Grading: the median of {args.gradings} host-side gradings of "
            "a do-nothing attempt (a reset, then the grader: hidden tests or checks sent into the sandbox and run in "
            "full). Concurrent episodes: sessions opened at once, each resetting and calling a tool, doubling from 1 "
            f"up to {args.max_concurrency} or the server's `max_sessions` (its manifest's setting) less the measuring "
            "session; the largest N where every episode succeeded.",
            "",
            *lines,
            "",
        ]
        (ROOT / "docs" / "benchmarks-environments.md").write_text("\n".join(doc), encoding="utf-8")
        console.print("wrote docs/benchmarks-environments.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
