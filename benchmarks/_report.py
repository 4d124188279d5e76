"""Results of bench_echo.py and how they are shown: the rich table, docs/benchmarks.md, the plot."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import json
import math
import os
import platform
import statistics
import subprocess
from collections import Counter
from collections.abc import Sequence
from pathlib import Path


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of already sorted values (q in 0..100)."""
    if not sorted_values:
        return math.nan
    rank = max(1, math.ceil(q / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


@dataclasses.dataclass(frozen=True)
class LatencyStats:
    """Round-trip times in milliseconds."""

    count: int
    median_ms: float
    p99_ms: float

    @classmethod
    def from_ns(cls, samples_ns: Sequence[int]) -> LatencyStats:
        values = sorted(s / 1e6 for s in samples_ns)
        return cls(len(values), statistics.median(values), percentile(values, 99))


@dataclasses.dataclass
class ConcurrencyResult:
    sessions: int
    opened: int = 0
    ok_sessions: int = 0
    ok_steps: int = 0
    steps_per_s: float = 0.0
    open_s: float = 0.0
    step_p50_ms: float = math.nan
    step_p99_ms: float = math.nan
    baseline_rss_kib: int = 0
    idle_rss_kib: int = 0
    server_threads: int = 0
    stepped_rss_kib: int = 0
    """Server RSS with the N sessions still open, after each has stepped."""
    stepped_threads: int = 0
    errors: dict[str, int] = dataclasses.field(default_factory=dict)
    note: str = ""
    runs: int = 1

    @property
    def all_ok(self) -> bool:
        return self.ok_sessions == self.sessions and not self.note

    @property
    def kib_per_idle_session(self) -> float:
        if self.opened == 0:
            return math.nan
        return (self.idle_rss_kib - self.baseline_rss_kib) / self.opened

    @property
    def kib_per_stepped_session(self) -> float:
        if self.opened == 0 or not self.stepped_rss_kib:
            return math.nan
        return (self.stepped_rss_kib - self.baseline_rss_kib) / self.opened


def best_of(runs: list[ConcurrencyResult]) -> ConcurrencyResult:
    """The run with the most steps/s, but with the worst success count and every run's errors:
    noise from a shared machine may lower throughput, but a failure is never averaged away."""
    best = dataclasses.replace(max(runs, key=lambda r: r.steps_per_s))
    best.ok_sessions = min(r.ok_sessions for r in runs)
    errors: Counter[str] = Counter()
    for r in runs:
        errors.update(r.errors)
    best.errors = dict(errors.most_common(5))
    best.note = "; ".join(sorted({r.note for r in runs if r.note}))
    best.runs = len(runs)
    return best


@dataclasses.dataclass
class TargetResults:
    name: str
    ws: LatencyStats | None = None
    """One connection, the `websockets` client."""
    ws_raw: LatencyStats | None = None
    """One connection, the raw-frame client (`_rawws.RawWebSocket`)."""
    http: LatencyStats | None = None
    mcp_post: LatencyStats | None = None
    mcp_post_refused: str = ""
    """Why a stateless `tools/call` was refused (ours: it needs an episode), when it was."""
    mcp_bound: LatencyStats | None = None
    mcp_client: LatencyStats | None = None
    mcp_bare: LatencyStats | None = None
    """The same official client against a bare `MCPServer` with one tool, interleaved with `mcp_client`."""
    concurrency: list[ConcurrencyResult] = dataclasses.field(default_factory=list)
    """Per N, the best of its runs (see `best_of`)."""
    concurrency_runs: list[ConcurrencyResult] = dataclasses.field(default_factory=list)
    """Every run, as measured."""
    failures: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class Row:
    metric: str
    ours: float | None
    theirs: float | None
    better: str  # "lower" or "higher"
    fmt: str = "{:.3f}"
    ours_text: str | None = None
    theirs_text: str | None = None

    def cells(self) -> tuple[str, str, str, str, str]:
        def show(v: float | None, text: str | None) -> str:
            if text is not None:
                return text
            return "–" if v is None or math.isnan(v) else self.fmt.format(v)

        ratio = "–"
        if (
            self.ours is not None
            and self.theirs
            and not math.isnan(self.ours)
            and not math.isnan(self.theirs)
        ):
            ratio = f"{self.ours / self.theirs:.2f}"
        return (
            self.metric,
            show(self.ours, self.ours_text),
            show(self.theirs, self.theirs_text),
            ratio,
            self.better,
        )


def _largest_ok(results: list[ConcurrencyResult]) -> int | None:
    ok = [r.sessions for r in results if r.all_ok]
    return max(ok) if ok else None


def build_rows(
    ours: TargetResults | None, theirs: TargetResults | None, blocking: TargetResults | None = None
) -> list[Row]:
    """The table's rows; `blocking` is ours on the echo environment with `BLOCKING = True`."""

    def get(res: TargetResults | None, attr: str, field: str) -> float | None:
        stats = getattr(res, attr) if res else None
        return getattr(stats, field) if stats else None

    rows: list[Row] = []
    latency_metrics = (
        ("ws", "WS step, websockets client"),
        ("ws_raw", "WS step, raw-frame client"),
        ("http", "HTTP step"),
        ("mcp_post", "MCP tools/call POST, stateless"),
        ("mcp_bound", "MCP tools/call POST, in a session"),
    )
    for attr, label in latency_metrics:
        for field, stat in (("median_ms", "median"), ("p99_ms", "p99")):
            refused = attr == "mcp_post" and ours is not None and ours.mcp_post_refused
            rows.append(
                Row(
                    f"{label}, {stat} (ms)",
                    get(ours, attr, field),
                    get(theirs, attr, field),
                    "lower",
                    ours_text="refused (no episode)" if refused else None,
                )
            )
    if blocking is not None:
        for field, stat in (("median_ms", "median"), ("p99_ms", "p99")):
            rows.append(
                Row(
                    f"WS step, raw-frame client, BLOCKING echo, {stat} (ms)",
                    get(blocking, "ws_raw", field),
                    get(theirs, "ws_raw", field),
                    "lower",
                )
            )
    for field, stat in (("median_ms", "median"), ("p99_ms", "p99")):
        rows.append(
            Row(
                f"MCP ClientSession.call_tool, {stat} (ms)",
                get(ours, "mcp_client", field),
                None,
                "lower",
                theirs_text="n/a" if theirs else None,
            )
        )
    by_n: dict[int, dict[str, ConcurrencyResult]] = {}
    for label, res in (("ours", ours), ("theirs", theirs), ("blocking", blocking)):
        for r in res.concurrency if res else []:
            by_n.setdefault(r.sessions, {})[label] = r
    for n in sorted(by_n):
        o, t = by_n[n].get("ours"), by_n[n].get("theirs")

        def ok_text(r: ConcurrencyResult | None) -> str | None:
            if r is None:
                return None
            text = f"{r.ok_sessions}/{r.sessions}"
            return text + ("" if r.all_ok else " ✗")

        rows.append(
            Row(
                f"{n} sessions: sessions fully OK",
                None,
                None,
                "higher",
                ours_text=ok_text(o),
                theirs_text=ok_text(t),
            )
        )
        rows.append(
            Row(
                f"{n} sessions: steps/s",
                o.steps_per_s if o else None,
                t.steps_per_s if t else None,
                "higher",
                fmt="{:,.0f}",
            )
        )
        rows.append(
            Row(
                f"{n} sessions: step p99 under load (ms)",
                o.step_p99_ms if o else None,
                t.step_p99_ms if t else None,
                "lower",
                fmt="{:.1f}",
            )
        )
        rows.append(
            Row(
                f"{n} sessions: KiB per idle session",
                o.kib_per_idle_session if o else None,
                t.kib_per_idle_session if t else None,
                "lower",
                fmt="{:.1f}",
            )
        )
        rows.append(
            Row(
                f"{n} sessions: server RSS idle (MiB)",
                o.idle_rss_kib / 1024 if o else None,
                t.idle_rss_kib / 1024 if t else None,
                "lower",
                fmt="{:.0f}",
            )
        )
        rows.append(
            Row(
                f"{n} sessions: server RSS after the steps (MiB)",
                o.stepped_rss_kib / 1024 if o and o.stepped_rss_kib else None,
                t.stepped_rss_kib / 1024 if t and t.stepped_rss_kib else None,
                "lower",
                fmt="{:.0f}",
            )
        )
        rows.append(
            Row(
                f"{n} sessions: KiB per session after the steps",
                o.kib_per_stepped_session if o else None,
                t.kib_per_stepped_session if t else None,
                "lower",
                fmt="{:.1f}",
            )
        )
        b = by_n[n].get("blocking")
        if b is not None:
            rows.append(
                Row(
                    f"{n} sessions, BLOCKING echo: sessions fully OK",
                    None,
                    None,
                    "higher",
                    ours_text=ok_text(b),
                    theirs_text=ok_text(t),
                )
            )
            rows.append(
                Row(
                    f"{n} sessions, BLOCKING echo: steps/s",
                    b.steps_per_s,
                    t.steps_per_s if t else None,
                    "higher",
                    fmt="{:,.0f}",
                )
            )
            rows.append(
                Row(
                    f"{n} sessions, BLOCKING echo: server RSS after the steps (MiB)",
                    b.stepped_rss_kib / 1024 if b.stepped_rss_kib else None,
                    t.stepped_rss_kib / 1024 if t and t.stepped_rss_kib else None,
                    "lower",
                    fmt="{:.0f}",
                )
            )
            rows.append(
                Row(
                    f"{n} sessions, BLOCKING echo: server threads after the steps",
                    float(b.stepped_threads),
                    float(t.stepped_threads) if t else None,
                    "lower",
                    fmt="{:,.0f}",
                )
            )
    lo = _largest_ok(ours.concurrency) if ours else None
    lt = _largest_ok(theirs.concurrency) if theirs else None
    if by_n:
        rows.append(
            Row(
                "largest N with zero failures",
                float(lo) if lo else None,
                float(lt) if lt else None,
                "higher",
                fmt="{:,.0f}",
                ours_text=None if lo or not ours else "none",
                theirs_text=None if lt or not theirs else "none",
            )
        )
    return rows


def ceiling_lines(results: dict[str, TargetResults]) -> list[str]:
    """The harness ceiling, and a warning wherever a server came near it."""
    ceiling = results.get("ceiling")
    if ceiling is None:
        return ["Harness ceiling not measured (--no-ceiling)."]
    what = "a WebSocket server that answers every frame with a fixed reply (no JSON, no env)"
    lines = []
    if ceiling.ws:
        lines.append(
            f"Harness ceiling, {what}: WS step median {ceiling.ws.median_ms:.3f} ms, "
            f"p99 {ceiling.ws.p99_ms:.3f} ms."
        )
    for r in ceiling.concurrency:
        line = f"Harness ceiling at {r.sessions} sessions: {r.steps_per_s:,.0f} steps/s"
        if not r.all_ok:
            line += f" ({r.ok_sessions}/{r.sessions} sessions OK: {r.note or 'failures'})"
        near = [
            name
            for name, res in results.items()
            if name != "ceiling"
            for x in res.concurrency
            if x.sessions == r.sessions and x.steps_per_s > 0.7 * r.steps_per_s
        ]
        if near:
            line += f"; WARNING: {', '.join(near)} within 70% of it, so the client may be the limit there"
        lines.append(line + ".")
    return lines


def target_lines(
    ours: TargetResults | None, theirs: TargetResults | None, blocking: TargetResults | None = None
) -> list[str]:
    """Our targets, each with the number measured (a ratio from the same run where it compares)
    and whether it is met."""
    if ours is None:
        return []

    def verdict(ok: bool | None) -> str:
        return "not measured" if ok is None else ("met" if ok else "NOT met")

    lines = []
    for attr, client in (("ws", "websockets client"), ("ws_raw", "raw-frame client")):
        mine, other = getattr(ours, attr), getattr(theirs, attr) if theirs else None
        if mine and other:
            ratio = mine.median_ms / other.median_ms
            lines.append(
                f"WS step median <= 0.5x OpenEnv's ({client}): {mine.median_ms:.3f} vs {other.median_ms:.3f} ms, "
                f"x{ratio:.2f}, {verdict(ratio <= 0.5)}"
            )
            lines.append(
                f"WS step p99 no worse than OpenEnv's ({client}): {mine.p99_ms:.3f} vs {other.p99_ms:.3f} ms, "
                f"x{mine.p99_ms / other.p99_ms:.2f}, {verdict(mine.p99_ms <= other.p99_ms)}"
            )
    if ours.mcp_client and ours.mcp_bare:
        ratio = ours.mcp_client.median_ms / ours.mcp_bare.median_ms
        lines.append(
            f"MCP ClientSession.call_tool within 1.3x of a bare MCPServer and <= 1.5 ms: "
            f"{ours.mcp_client.median_ms:.3f} vs {ours.mcp_bare.median_ms:.3f} ms, x{ratio:.2f}, "
            f"{verdict(ratio <= 1.3 and ours.mcp_client.median_ms <= 1.5)}"
        )
    theirs_at = {r.sessions: r for r in theirs.concurrency} if theirs else {}
    for label, res in (("ours", ours), ("ours, BLOCKING echo", blocking)):
        at = {r.sessions: r for r in res.concurrency} if res else {}
        r, t = at.get(10_000), theirs_at.get(10_000)
        if r is None:
            continue
        lines.append(
            f"10,000 concurrent sessions with no failure ({label}): {r.ok_sessions:,}/10,000 OK, {verdict(r.all_ok)}"
        )
        if t is not None and t.steps_per_s > 0:
            ratio = r.steps_per_s / t.steps_per_s
            lines.append(f"steps/s at 10,000 sessions >= 3x OpenEnv's ({label}): x{ratio:.2f}, {verdict(ratio >= 3)}")
        if t is not None and t.stepped_rss_kib and r.stepped_rss_kib:
            ratio = r.stepped_rss_kib / t.stepped_rss_kib
            lines.append(
                f"server memory after the steps at 10,000 sessions <= 1/3 of OpenEnv's ({label}): "
                f"{r.stepped_rss_kib / 1024:.0f} vs {t.stepped_rss_kib / 1024:.0f} MiB, x{ratio:.2f}, "
                f"{verdict(ratio <= 1 / 3)}; {r.kib_per_idle_session:.1f} KiB per session idle after reset, "
                f"{r.kib_per_stepped_session:.1f} KiB after the steps"
            )
    per_session = [r.kib_per_idle_session for r in ours.concurrency if r.opened >= 1000]
    if per_session:
        worst = max(per_session)
        lines.append(
            f"< 50 KB server memory per idle session (N >= 1,000): at most {worst * 1.024:.1f} KB, "
            f"{verdict(worst * 1.024 < 50)}"
        )
    return lines


def print_table(rows: list[Row], extra: list[str]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="openenv-sdk echo server vs OpenEnv 0.10.0 echo server")
    table.add_column("metric")
    for col in ("ours", "openenv", "ours/openenv"):
        table.add_column(col, justify="right")
    table.add_column("better")
    for row in rows:
        table.add_row(*row.cells())
    console = Console(width=max(110, Console().width))
    console.print(table)
    for line in extra:
        console.print(line, markup=False, highlight=False)


def machine_description() -> list[str]:
    cpu = "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem_gib = "?"
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_gib = f"{int(line.split()[1]) / 1024 / 1024:.0f}"
    return [
        f"- Date: {datetime.date.today().isoformat()}",
        f"- CPU: {cpu}, {os.cpu_count()} cores (nproc); memory {mem_gib} GiB",
        f"- OS: {platform.system()} {platform.release()}",
        f"- Python: {platform.python_version()} (both servers and the client)",
    ]


def _fmt(value: float, spec: str) -> str:
    return "–" if value is None or math.isnan(value) else format(value, spec)


def concurrency_detail(results: dict[str, TargetResults]) -> list[str]:
    """One markdown row per server, N and run, with everything measured."""
    lines = [
        (
            "| server | N | run | opened | sessions OK | steps OK | steps/s | open phase (s) | step p50 (ms) "
            "| step p99 (ms) | RSS before (MiB) | RSS idle (MiB) | KiB/idle session | RSS after steps (MiB) "
            "| server threads (idle / after steps) |"
        ),
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, res in results.items():
        seen: Counter[int] = Counter()
        for r in res.concurrency_runs:
            seen[r.sessions] += 1
            lines.append(
                f"| {name} | {r.sessions:,} | {seen[r.sessions]} | {r.opened:,} | {r.ok_sessions:,} "
                f"| {r.ok_steps:,} | {r.steps_per_s:,.0f} | {r.open_s:.1f} | {_fmt(r.step_p50_ms, '.1f')} "
                f"| {_fmt(r.step_p99_ms, '.1f')} | {r.baseline_rss_kib / 1024:.0f} | {r.idle_rss_kib / 1024:.0f} "
                f"| {_fmt(r.kib_per_idle_session, '.1f')} | {r.stepped_rss_kib / 1024:.0f} "
                f"| {r.server_threads:,} / {r.stepped_threads:,} |"
            )
    return lines


def markdown_report(
    rows: list[Row],
    extra: list[str],
    results: dict[str, TargetResults],
    args: argparse.Namespace,
    plot_note: str,
) -> str:
    """docs/benchmarks.md: machine, method, the table, the detail, failures, the plot."""
    client = (
        "a minimal asyncio-protocol WebSocket client (`benchmarks/_rawws.py`, pre-built masked frames)"
        if args.conc_client == "raw"
        else "the `websockets` client"
    )
    lines = [
        "# Benchmarks: echo environment, ours vs OpenEnv",
        "",
        "Generated by `benchmarks/bench_echo.py --write-docs`; edit the script, not this page.",
        "",
        "Both servers serve the same echo environment and are measured in the same run, with the same",
        "client code, over loopback:",
        "",
        "- **ours**: `openenv serve environments/echo --log-level warning` (this repo).",
        "- **openenv**: `openenv==0.10.0` running `benchmarks/openenv_echo_server.py`, written the way",
        "  OpenEnv's own `envs/echo_env` is: an `MCPEnvironment` whose FastMCP server has an",
        '  `echo_message` tool, plus a plain `{"message": str}` action, served by `create_app` with',
        "  `max_concurrent_envs` set high. Its venv has uvloop and httptools like ours (a bare",
        "  `pip install openenv` has neither, and is slower).",
        "",
        "## Machine",
        "",
        *machine_description(),
        (
            f"- Load: {getattr(args, 'load_text', '?')}. This machine is shared with other work, so "
            f"throughput is noisy: each concurrency point ran {args.repeat} time(s), servers interleaved, "
            "keeping the best steps/s and the worst success count"
            + (
                f"; each measurement waited (up to {args.calm_wait:.0f} s) for fewer than {args.calm:g} other "
                f"runnable tasks, and {getattr(args, 'calm_timeouts', 0)} of them gave up waiting."
                if args.calm is not None
                else "."
            )
        ),
        "",
        "## Method",
        "",
        (
            f"- **WS step**: one connection, a reset, {args.warmup} warm-up steps, then {args.ws_steps} timed "
            'steps `{"type": "step", "data": {"message": "hi"}}`, one at a time; once with the `websockets` '
            "client (no compression), once with the raw-frame client (`benchmarks/_rawws.py`, pre-built "
            "masked frames: less client time per step, so more of the round trip is the server's). All "
            "servers run at once, one connection each, and take turns of 100 timed steps (ours, ours with the "
            "BLOCKING echo, OpenEnv's, the ceiling, ours, ...), so that load from other work on this shared "
            "machine falls on all of them alike; each turn begins with 2 untimed steps (a server that slept "
            "while the others were stepped wakes slower). Each server is first left to settle, until its "
            "process is idle: ours imports the official MCP server in the background once it answers."
        ),
        (
            f"- **HTTP step**: a keep-alive `httpx.Client`, {args.http_steps} timed `POST /step`. OpenEnv's HTTP "
            "step is stateless (a fresh environment per request); ours steps the session that `POST /reset` "
            "created, named by the `X-OpenEnv-Session` header."
        ),
        (
            f"- **MCP**: {args.mcp_calls} timed JSON-RPC `tools/call` of the echo tool (ours: `echo`, "
            "OpenEnv's: `echo_message`) as plain `POST /mcp`. *Stateless*: no session (both build a "
            "throwaway environment per call). *In a session*: ours with the session's MCP token, OpenEnv with "
            "`params.session_id` from `openenv/session/create`. Ours refuses a stateless `tools/call` "
            "(`SESSION_REQUIRED`: a tool runs in an episode or not at all). For ours also the official `mcp` "
            "client (`ClientSession.call_tool` over streamable HTTP), interleaved in 4 rounds with the same "
            "client against a bare `MCPServer` with one `echo` tool and the same transport settings "
            "(`benchmarks/bare_mcp_server.py`); OpenEnv's `/mcp` is its own JSON-RPC subset, which that "
            "client cannot use."
        ),
        (
            "- **Concurrency**: N WebSocket sessions opened at once (connect + reset), then all step together, "
            f"{args.steps_per_session} steps each; a session is OK only if every step succeeds. steps/s = "
            f"successful steps / wall time of the step phase. Client: up to {args.client_procs} processes (one "
            f"per 500 sessions), asyncio + uvloop, {client}. Each server is restarted for every N. Memory "
            "per idle session = (server RSS, whole process tree, with the N sessions open and idle after "
            "reset − RSS before they opened) / N; per session after the steps, the same with the N sessions "
            "still open, each having stepped. *BLOCKING echo*: our server on the echo environment with "
            "`BLOCKING = True` (`benchmarks/echo_blocking/`), so that its calls run on worker threads, as "
            "OpenEnv's do and as every environment's do by default."
        ),
        (
            "- **Harness ceiling**: the same client against a WebSocket server that answers every frame with "
            "a fixed reply (no JSON, no env). A server close to it would be measuring the client."
        ),
        "- **ours/openenv** is the ratio of the two columns; **better** says which direction wins.",
        "",
        "## Targets (ours)",
        "",
        *(
            f"- {line}"
            for line in target_lines(results.get("ours"), results.get("openenv"), results.get("ours-blocking"))
        ),
        "",
        "## Results",
        "",
        "| metric | ours | openenv | ours/openenv | better |",
        "| --- | ---: | ---: | ---: | --- |",
        *("| " + " | ".join(row.cells()) + " |" for row in rows),
        "",
        *(f"- {line}" for line in extra),
    ]
    if any(res.concurrency_runs for res in results.values()):
        lines += ["", "### Concurrency detail (every run)", "", *concurrency_detail(results)]
    failures = []
    for name, res in results.items():
        failures += [f"- {name}: {failure}" for failure in res.failures]
        for r in res.concurrency_runs:
            if r.errors or r.note:
                detail = "; ".join(f"{k} ×{v}" for k, v in r.errors.items())
                failures.append(
                    f"- {name}, {r.sessions:,} sessions: {' '.join(x for x in (r.note, detail) if x)}"
                )
    if failures:
        lines += ["", "### Failures seen", "", *failures]
    lines += ["", "## Steps/s vs concurrent sessions", ""]
    lines.append(plot_note or "![steps/s vs concurrent sessions](img/bench_concurrency.png)")
    lines += [
        "",
        "## Reproduce",
        "",
        "```bash",
        "bash benchmarks/setup_openenv_venv.sh",
        (
            f".venv/bin/python benchmarks/bench_echo.py --sessions {','.join(map(str, args.sessions))} "
            f"--repeat {args.repeat}{f' --calm {args.calm:g}' if args.calm is not None else ''} --write-docs"
        ),
        "```",
        "",
    ]
    return "\n".join(lines)


PLOT_SCRIPT = r"""
import json, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
data = json.loads(sys.argv[1])
fig, ax = plt.subplots(figsize=(7, 4.2), dpi=120)
style = {
    "ours": ("o-", "tab:blue"),
    "ours-blocking": ("d-", "tab:green"),
    "openenv": ("s-", "tab:orange"),
    "ceiling": ("^--", "tab:gray"),
}
labels = {
    "ours": "ours (openenv-sdk)",
    "ours-blocking": "ours, BLOCKING echo (worker threads)",
    "openenv": "OpenEnv 0.10.0",
    "ceiling": "harness ceiling (fixed-reply server)",
}
for name, points in data["series"].items():
    if not points:
        continue
    xs = [p[0] for p in points]
    ys = [p[1] for p in points]
    marker, color = style.get(name, ("o-", None))
    ax.plot(xs, ys, marker, color=color, label=labels.get(name, name))
    for x, y, ok in points:
        if not ok:
            ax.annotate("failures", (x, y), textcoords="offset points", xytext=(0, 6), ha="center", fontsize=7, color=color)
ax.set_xscale("log")
ax.set_xlabel("concurrent WebSocket sessions (each reset + %d steps)" % data["steps"])
ax.set_ylabel("successful steps / s")
ax.set_title("Echo env throughput vs concurrency (%s)" % data["machine"])
ax.grid(True, which="both", alpha=0.3)
ax.legend()
fig.tight_layout()
fig.savefig(data["out"])
"""


def write_plot(results: dict[str, TargetResults], steps: int, out: Path, pythons: Sequence[str]) -> str:
    """Render the concurrency plot; return "" on success or a note saying why it was skipped."""
    python = None
    for candidate in pythons:
        if not Path(candidate).exists():
            continue
        probe = subprocess.run([candidate, "-c", "import matplotlib"], capture_output=True, check=False)
        if probe.returncode == 0:
            python = candidate
            break
    if python is None:
        return "(plot skipped: matplotlib is in neither our venv nor .bench/tools; run benchmarks/setup_openenv_venv.sh)"
    series = {
        name: [(r.sessions, r.steps_per_s, r.all_ok) for r in res.concurrency]
        for name, res in results.items()
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    data = {
        "series": series,
        "steps": steps,
        "out": str(out),
        "machine": f"{os.cpu_count()} cores",
    }
    proc = subprocess.run(
        [python, "-c", PLOT_SCRIPT, json.dumps(data)], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        return f"(plot failed: {proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else proc.returncode})"
    return ""
