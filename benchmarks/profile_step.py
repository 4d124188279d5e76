"""Where our server's time goes on the step path: py-spy samples of `openenv serve environments/echo`.

Two runs, each on a fresh server (settled first, as in bench_echo.py):
    - one connection, a reset, then `--steps` steps one at a time (the raw-frame client);
    - `--sessions` WebSocket sessions at once, each reset + 10 steps (bench_echo's concurrency
      test, its client processes and all).

py-spy samples the server with `--gil`: only samples of a thread holding the GIL count, so an
event loop waiting in epoll is not counted and the shares are of the server's Python time.
Every sample is put in one stage, by the innermost frame that names one (the table below);
what no stage names is "other". The stages' notes say what was done about each.

Usage (from the repo root; py-spy from `bash benchmarks/setup_openenv_venv.sh`, in .bench/tools):
    .venv/bin/python benchmarks/profile_step.py                       # prints the tables
    .venv/bin/python benchmarks/profile_step.py --write-docs          # also docs/benchmarks.md
    .venv/bin/python benchmarks/profile_step.py --sessions 1000 --steps 20000
    .venv/bin/python benchmarks/profile_step.py --calls                # Python calls per WS step

`--calls` counts instead of sampling: the server runs under cProfile twice, over a few steps
and over `--steps` more; the difference of their total calls (Python and C functions, and
each resumption of a coroutine) over the difference of their steps is the calls one step
costs. Load does not move it, so it compares commits on a shared machine.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import datetime
import os
import pstats
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import bench_echo as be
import httpx
from _docs import write_marked_section
from prometheus_client.parser import text_string_to_metric_families

DOCS_MD = be.REPO_ROOT / "docs" / "benchmarks.md"
BEGIN, END = "<!-- profile_step: begin -->", "<!-- profile_step: end -->"


@dataclasses.dataclass(frozen=True)
class Stage:
    """A part of the step path, found by the frames that name it (`function (file` prefixes)."""

    name: str
    frames: tuple[str, ...]
    note: str


# Innermost first: a sample goes to the first stage one of whose frames is on its stack, walking
# from the leaf out, so `_dump` inside `_handle` counts as "reply JSON", not "our handler".
STAGES = (
    Stage(
        "socket write (uvicorn send: frame + transport.write)",
        ("WebSocketsSansIOProtocol.send (uvicorn",),
        "The kernel's loopback send (it runs the receiver's TCP path too) and websockets' frame "
        "serialisation: the same in every uvicorn server. Nothing to do in the SDK.",
    ),
    Stage(
        "frame parsing and ASGI queue (uvicorn receive)",
        ("WebSocketsSansIOProtocol.data_received", "WebSocketsSansIOProtocol.receive", "WebSocket.receive (starlette"),
        "websockets' sans-I/O parser and uvicorn's per-connection queue. Nothing to do in the SDK.",
    ),
    Stage(
        "environment code (EchoEnvironment.step, reset)",
        ("EchoEnvironment.", "BlockingEchoEnvironment."),
        "The environment's own work (its State validates assignments, as OpenEnv's does). Not the SDK's.",
    ),
    Stage(
        "metrics (/metrics counters and histograms)",
        ("ServerMetrics.call_done",),
        "prometheus-client's labels() took a lock and built a key twice per step: the label children "
        "are now looked up once per (call, outcome, tool) and cached; since 2026-11-27 a step is tallied "
        "in plain numbers (a count, a sum, a bucket by bisect) and added to the registry when it is read.",
    ),
    Stage(
        "reply JSON (_dump)",
        ("_dump (openenv_sdk/server/_ws.py",),
        "json.dumps was 3.2 us per reply: pydantic-core's to_json now (0.7 us), json.dumps only for "
        "what it cannot encode (so failures read as before).",
    ),
    Stage(
        "observation to dict (serialize_observation)",
        ("serialize_observation (openenv_sdk",),
        "One model_dump per observation, the dict built directly. Kept: encoding the model straight "
        "into the envelope saved only 0.4 us.",
    ),
    Stage(
        "message parsing and validation (WSRequest, the action model)",
        ("BaseModel.model_validate_json", "BaseModel.model_validate (", "check_json_text", "parse_tool_action"),
        "pydantic-core parses the envelope and validates the action (~2.6 us together); the UTF-8 and "
        "depth checks are C-speed. The tool-call check no longer walks the class's MRO per step (cached "
        "per class).",
    ),
    Stage(
        "thread hop (BLOCKING environments: worker pool)",
        ("WorkerPool.", "SessionLane.", "SessionWorker.", "Call.", "LoopHandoff.", "_FutureJob."),
        "A blocking environment's call crosses to a worker thread and back. It was one thread per "
        "session (10,000 threads for 10,000 sessions), then a thread per call in flight with a "
        "concurrent Future each; now calls queue for a few threads that run them back to back, and "
        "results return to the loop in batches (LoopHandoff), one wake-up for many.",
    ),
    Stage(
        "session bookkeeping (Session.step, decorators, lock)",
        ("Session.", "_observed.", "_shielded.", "guard_async", "guard_sync"),
        "Three thin wrappers (errors, metrics, BaseException guard) and the session lock. A quick sync "
        "call (BLOCKING = False) no longer takes the lock (nothing can interleave with it); "
        "iscoroutinefunction is cached per function.",
    ),
    Stage(
        "our message loop (_handle, serve_websocket)",
        ("_handle (openenv_sdk/server/_ws.py", "serve_websocket (openenv_sdk"),
        "Dispatch on the message type; the rest of the loop.",
    ),
    Stage(
        "garbage collection",
        ("(garbage collection)",),
        "A full collection after the background import of the official MCP server (~100,000 new "
        "objects) paused every session for ~60 ms in the first second: that import now runs with the "
        "collector off and freezes what it made (gc.freeze).",
    ),
    Stage(
        "event loop (uvloop callbacks, asyncio machinery)",
        ("Runner.run (asyncio", "run_until_complete"),
        "uvloop and asyncio scheduling between the steps.",
    ),
)


TAIL_NOTES = (
    "### The tail (p99) on one connection",
    "",
    "The 2026-11-21 run showed our single-connection p99 at 2.6 ms against OpenEnv's 0.61 ms (raw-frame "
    "client). Why: the server starts answering before it imports the official MCP server, which it does "
    "in a background thread (~0.3 s of CPU, ~100,000 new objects), and the benchmark measured its WS "
    "steps right after the start, over that import. The event loop waited up to 5 ms (Python's GIL "
    "switch interval) each time the import held the GIL, and the import's objects set off a full "
    "garbage collection of ~60 ms. Measured in windows of 1,000 steps from the start: p99 5-9 ms and a "
    "max of 55-65 ms in the first window, then p99 ~0.11 ms. What was done:",
    "",
    "- the import runs with the collector off and freezes what it made (`gc.freeze`), so no full "
    "collection walks those objects, then or later; the GIL switch interval is 1 ms meanwhile "
    "(`openenv_sdk/server/_mcp_endpoint.py::warm_up_mcp`): the worst step in the first second fell "
    "from ~60 ms to ~5 ms;",
    "- `bench_echo.py` waits until each server's process is idle before it measures (OpenEnv's imports "
    "everything before it answers), and measures all servers taking turns of 100 steps, so that "
    "load from other work on this shared 2-core machine falls on each alike. That load is what a p99 of a "
    "few ms here is: the fixed-reply ceiling server, which does nothing, shows the same tail.",
    "",
    "### Memory of 10,000 sessions that stepped",
    "",
    "Idle after reset, a session of ours holds ~32 KiB (the echo environment and its models, the "
    "WebSocket connection's buffers, the session's record). Stepping adds little to that on the echo "
    "environment as served (`BLOCKING = False`). The growth seen after steps came from environments "
    "whose calls run off the event loop (`BLOCKING = True`, the default): each session started a "
    "thread of its own at its first call and kept it, 10,006 threads for 10,000 sessions (767 MiB "
    "after the steps, against 637 MiB idle; 1,900 steps/s). Sessions then shared a pool where a "
    "call took an idle thread or started one: 22 threads and 496 MiB after the same run, but "
    "~3,000 steps/s, about OpenEnv's. py-spy showed why: the event loop held the GIL ~99% of the "
    "time, and per call it built a `concurrent.futures.Future` (a lock and a condition), chained "
    "it to an asyncio future (`wrap_future`), waited with `asyncio.wait` (a timer, a waiter), was "
    "woken once per result (`call_soon_threadsafe`), and started threads under load. Now the loop "
    "hands over a `Call` that settles its asyncio future through a `LoopHandoff` (results that end "
    "while the loop is busy come back in one wake-up), bounded by one `call_later` timer; and the "
    "calls queue for a few threads that run them back to back, each holding the GIL for many "
    "calls, another thread starting whenever the queue goes `stall_s` (50 ms) without a call "
    "ending (so calls that hang still hold up nobody for long, "
    "`tests/security/test_server_robustness.py`, `tests/server/test_worker.py`). BLOCKING echo, "
    "one after the other on this machine: 3,300 -> 5,400-5,600 steps/s at 10,000 sessions, "
    "6,400 -> 11,000-15,800 at 1,000. What still halved BLOCKING throughput at 10,000 sessions was "
    "not the hop but the garbage collector (above): with it mended, 12,100 steps/s (the tables above "
    "have the same-run ratios). "
    "`THREAD_AFFINITY = True` keeps a thread per session for libraries that need one.",
)


def classify(stack: Sequence[str]) -> str:
    for frame in reversed(stack):
        for stage in STAGES:
            if any(frame.startswith(prefix) or prefix in frame for prefix in stage.frames):
                return stage.name
    return "other"


def read_raw(path: Path) -> Counter[str]:
    """py-spy's raw output (`frame;frame;... count` per line) as samples per stage."""
    stages: Counter[str] = Counter()
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        stages[classify(stack.split(";"))] += int(count)
    return stages


def top_frames(path: Path, limit: int = 12) -> list[tuple[str, int]]:
    """The functions most often at the top of the stack (self time), line numbers dropped."""
    leaves: Counter[str] = Counter()
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            leaves[re.sub(r":\d+\)", ")", stack.split(";")[-1])] += int(count)
    return leaves.most_common(limit)


class PySpy:
    """`py-spy record` attached to a running process until it exits (or `stop()`)."""

    def __init__(self, pid: int, out: Path, rate: int) -> None:
        here = os.pathsep.join([str(Path(sys.executable).parent), str(be.TOOLS_PYTHON.parent)])
        exe = shutil.which("py-spy", path=here) or shutil.which("py-spy")
        if exe is None:
            raise SystemExit("py-spy not found: run benchmarks/setup_openenv_venv.sh (it goes in .bench/tools)")
        self.out = out
        argv = [exe, "record", "--pid", str(pid), "--rate", str(rate), "--format", "raw", "--gil",
                "--nonblocking", "--output", str(out)]  # fmt: skip
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(2)  # py-spy writes its file on SIGINT
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(30)
        if not self.out.exists():
            detail = self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""
            raise RuntimeError(f"py-spy wrote nothing: {detail[-500:]}")


def profile_single_connection(steps: int, rate: int, workdir: Path) -> Path:
    out = workdir / "single.raw"
    with be.ServerProcess(be.ours_target(None, "ours"), max_sessions=64) as server:
        spy = PySpy(server.pid, out, rate)
        try:
            asyncio.run(be.raw_ws_step_latency(server.ws_url, steps, 100))
        finally:
            spy.stop()
    return out


def calls_per_step(steps: int, workdir: Path, base_steps: int = 200, by_function: list[str] | None = None) -> float:
    """Python calls (and coroutine resumptions) per WS step of `openenv serve environments/echo`
    under cProfile: (calls over `base_steps + steps` - calls over `base_steps`) / `steps`, on one
    connection (raw-frame client), each run on a fresh server stopped gracefully (cProfile
    writes its file at exit). `by_function`, when given, gets one line per function called on
    the step path (its calls per step, then where it is), most called first."""
    totals = []
    per_function: list[dict[tuple[str, int, str], int]] = []
    for n, run in ((base_steps, "a"), (base_steps + steps, "b")):
        out = workdir / f"calls-{run}.prof"
        ours = be.ours_target(None, "ours")
        target = dataclasses.replace(ours, argv=(sys.executable, "-m", "cProfile", "-o", str(out), *ours.argv))
        with be.ServerProcess(target, max_sessions=64) as server:
            asyncio.run(be.raw_ws_step_latency(server.ws_url, n, 0))
        stats = pstats.Stats(str(out))
        totals.append(stats.total_calls)  # type: ignore[attr-defined]
        per_function.append({where: row[1] for where, row in stats.stats.items()})  # type: ignore[attr-defined]
    if by_function is not None:
        before, after = per_function
        rows = sorted(((n - before.get(where, 0)) / steps, where) for where, n in after.items())
        for per_step, (file, line, name) in reversed(rows):
            if per_step >= 0.5:
                by_function.append(f"{per_step:6.2f}  {name}  {file}:{line}")
    return (totals[1] - totals[0]) / steps


class GcScraper:
    """The server's garbage-collection counters (`openenv_gc_*` in /metrics), read every second
    while it runs: py-spy cannot see the collector (it runs inside whatever allocation set it off)."""

    def __init__(self, http_url: str) -> None:
        self.url = f"{http_url}/metrics"
        self.first: dict[str, float] | None = None
        self.last: dict[str, float] | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while not self._stop.wait(1.0 if self.first is not None else 0.0):
            try:
                text = httpx.get(self.url, timeout=5).text
            except httpx.HTTPError:
                continue  # the server is busy, or gone
            sample = {
                f"{s.name}{{{s.labels.get('generation', '')}}}": s.value
                for family in text_string_to_metric_families(text)
                for s in family.samples
                if s.name.startswith("openenv_gc_")
            }
            self.first = self.first or sample
            self.last = sample

    def stop(self) -> dict[str, float]:
        """Full collections, their seconds and longest pause, and young seconds, over the run."""
        self._stop.set()
        self._thread.join(10)
        first, last = self.first or {}, self.last or {}

        def delta(key: str) -> float:
            return last.get(key, 0.0) - first.get(key, 0.0)

        return {
            "full_collections": delta("openenv_gc_collections_total{2}"),
            "full_s": delta("openenv_gc_pause_seconds_total{2}"),
            "longest_full_s": last.get("openenv_gc_longest_pause_seconds{2}", 0.0),
            "younger_s": delta("openenv_gc_pause_seconds_total{0}") + delta("openenv_gc_pause_seconds_total{1}"),
        }


def profile_concurrency(sessions: int, rate: int, workdir: Path) -> tuple[Path, be.ConcurrencyResult, dict[str, float]]:
    out = workdir / "concurrency.raw"
    spies: list[PySpy] = []
    scrapers: list[GcScraper] = []

    def attach(server: be.ServerProcess) -> None:
        spies.append(PySpy(server.pid, out, rate))
        scrapers.append(GcScraper(server.http_url))

    args = be.parse_args(["--sessions", str(sessions)])
    result = be.run_concurrency(be.ours_target(None, "ours"), sessions, 10, args, on_server=attach)
    for spy in spies:
        spy.stop()  # the server has stopped: py-spy has written its file
    gc_figures = scrapers[0].stop() if scrapers else {}
    return out, result, gc_figures


def gc_notes(sessions: int, figures: dict[str, float]) -> list[str]:
    measured = (
        f"In this run ({sessions:,} sessions, the policy on): {figures['full_collections']:.0f} full collection(s) "
        f"took {figures['full_s']:.2f} s (the longest {figures['longest_full_s']:.2f} s), the younger "
        f"generations {figures['younger_s']:.2f} s."
        if figures
        else "This run could not read the server's counters."
    )
    return [
        "### Garbage collection at 10,000 sessions",
        "",
        "py-spy cannot see the garbage collector: it runs inside whichever allocation sets it off, so its "
        "time lands in that frame's stage above (the websockets frame parser's, mostly). The server's own "
        "counters (`openenv_gc_*` in `/metrics`, timed by a `gc.callbacks` entry) showed it. With Python's "
        "default thresholds, at 10,000 sessions x 10 steps (one client process), 23 full collections took "
        "13.6 s of a ~30 s run of the BLOCKING echo (~0.6 s each: they walk ~700,000 objects), and 14 took "
        "5.5 s on the echo. A request in flight survives two young collections, so when it ends its objects "
        "count as old garbage, and a busy server looks to the collector like one whose heap keeps growing. "
        "What was done (`openenv_sdk/server/_gc.py`, `ServerConfig.gc_full_interval_s`): while a server "
        "runs, what is alive at start-up is frozen (`gc.freeze`), allocation sets off a full collection 100 "
        "times less often (third threshold 1,000, not 10), and a timer runs one at least every 60 s, so "
        "cyclic garbage is still freed within a minute. One after the other on this machine (two client "
        "processes): BLOCKING echo 5,600 -> 12,100 steps/s at 10,000 sessions, echo 11,800 -> 16,700; "
        "memory after the steps unchanged (460 and 413 MiB). " + measured,
    ]


def section(
    single: Path, conc: Path, sessions: int, steps: int, result: be.ConcurrencyResult, gc_figures: dict[str, float]
) -> list[str]:
    one, many = read_raw(single), read_raw(conc)
    total_one, total_many = sum(one.values()) or 1, sum(many.values()) or 1
    names = [stage.name for stage in STAGES] + ["other"]
    lines = [
        BEGIN,
        "## Where the time goes: a profile of the step path",
        "",
        f"Generated by `benchmarks/profile_step.py --write-docs` on {datetime.date.today().isoformat()}; edit "
        "the script, not this section. py-spy sampled `openenv serve environments/echo` (`--gil`: only "
        "samples holding the GIL, so the shares are of the server's Python time, waits excluded), once "
        f"over {steps:,} steps on one connection (raw-frame client), once over {sessions:,} sessions at "
        f"once, each reset + 10 steps ({result.ok_sessions:,}/{sessions:,} OK, {result.steps_per_s:,.0f} "
        "steps/s under the profiler). Each sample is counted in the innermost stage on its stack. The "
        "machine is shared (2 cores), so the shares, not the seconds, are what to read.",
        "",
        f"| stage | one connection | {sessions:,} sessions | what was done |",
        "| --- | ---: | ---: | --- |",
    ]
    notes = {stage.name: stage.note for stage in STAGES}
    for name in sorted(names, key=lambda n: -(one[n] / total_one + many[n] / total_many)):
        if not one[name] and not many[name]:
            continue
        lines.append(
            f"| {name} | {100 * one[name] / total_one:.1f}% | {100 * many[name] / total_many:.1f}% "
            f"| {notes.get(name, 'Everything else (the ASGI stack, starlette, small helpers).')} |"
        )
    lines += ["", "Top functions by self time (one connection):", ""]
    lines += [f"- {100 * n / total_one:.1f}% `{frame}`" for frame, n in top_frames(single, 10)]
    lines += ["", f"Top functions by self time ({sessions:,} sessions):", ""]
    lines += [f"- {100 * n / total_many:.1f}% `{frame}`" for frame, n in top_frames(conc, 10)]
    lines += ["", *gc_notes(sessions, gc_figures), "", *TAIL_NOTES]
    lines += [
        "",
        "Reproduce:",
        "",
        "```bash",
        f".venv/bin/python benchmarks/profile_step.py --steps {steps} --sessions {sessions} --write-docs",
        "```",
        END,
    ]
    return lines


def write_docs(lines: list[str]) -> None:
    write_marked_section(DOCS_MD, BEGIN, END, "\n".join(lines))


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=50_000, help="steps on one connection")
    p.add_argument("--sessions", type=int, default=10_000, help="sessions at once in the second run")
    p.add_argument("--rate", type=int, default=1000, help="py-spy samples per second")
    p.add_argument("--write-docs", action="store_true", help="write the section into docs/benchmarks.md")
    p.add_argument("--calls", action="store_true", help="only count Python calls per WS step under cProfile (over --steps steps)")
    p.add_argument("--by-function", action="store_true", help="with --calls: each function's calls per step as well")
    args = p.parse_args(argv)
    be.raise_nofile_limit()
    be.try_uvloop()
    if args.calls:
        with tempfile.TemporaryDirectory(prefix="profile-calls-") as tmp:
            rows: list[str] | None = [] if args.by_function else None
            per_step = calls_per_step(args.steps, Path(tmp), by_function=rows)
            print(f"{per_step:.1f} calls per step ({args.steps:,} steps, one connection)")
            print("\n".join(rows or ()))
        return 0
    with tempfile.TemporaryDirectory(prefix="profile-step-") as tmp:
        workdir = Path(tmp)
        single = profile_single_connection(args.steps, args.rate, workdir)
        conc, result, gc_figures = profile_concurrency(args.sessions, args.rate, workdir)
        lines = section(single, conc, args.sessions, args.steps, result, gc_figures)
    print("\n".join(lines[1:-1]))
    if args.write_docs:
        write_docs(lines)
        print(f"wrote {DOCS_MD.relative_to(be.REPO_ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
