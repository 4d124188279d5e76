"""Session bounds under abuse: one session tries to take 6 GiB and write 10 GB; the others' steps.

    python benchmarks/bench_session_bounds.py [--sessions 3] [--seconds 20] [--json] [--write-docs]

A real server (`openenv serve environments/terminal`, as root: per-session uids, cgroups and a
tmpfs folder per session) and real WebSocket clients. Two phases of the same length:

* idle: `--sessions` sessions each call the `bash` tool (`true`, a sandboxed command) in a loop;
* abuse: the same, while one more session calls `bash` with a command that starts 8 Python
  processes of 800 MiB each (6.4 GB, each under its per-process RLIMIT_AS) and writes 40 files
  of 250 MB (10 GB, each under RLIMIT_FSIZE), then removes them, again and again.

It prints what the abuser got (the peak memory of its session's cgroup, the bytes it managed to
write, how often the kernel killed a process of it) beside its limits, and the other sessions'
step latency (p50, p99) idle vs during the abuse. Target: p99 within 2x of idle.
`--write-docs` replaces the "Session bounds" section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import re
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from _docs import write_marked_section  # noqa: E402
from _proc import wait_until_idle  # noqa: E402

from openenv_sdk.sandbox import SandboxLimits  # noqa: E402
from openenv_sdk.sandbox._cgroup import CGROUP_PARENT, _mounts, _on_disk  # noqa: E402

SERVE = REPO / ".venv" / "bin" / "openenv"
ENV_DIR = "environments/terminal"
START_TIMEOUT_S = 60.0
STEP_TIMEOUT_S = 90.0
TARGET_RATIO = 2.0
ABUSE = (
    "for i in $(seq 8); do python3 -c 'import time; b = b\"x\" * (800 * 1024**2); time.sleep(4)' 2>/dev/null & done; "
    "for i in $(seq 40); do head -c 250M /dev/zero > f$i 2>/dev/null || break; done; "
    "echo written $(cat f* 2>/dev/null | wc -c); rm -f f*; wait"
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def step_frame(command: str) -> str:
    action = {"type": "call_tool", "tool_name": "bash", "arguments": {"command": command}}
    return json.dumps({"type": "step", "data": action})


async def call(ws: Any, frame: str) -> dict[str, Any]:
    await ws.send(frame)
    reply = json.loads(await asyncio.wait_for(ws.recv(), timeout=STEP_TIMEOUT_S))
    if reply.get("type") == "error":
        raise RuntimeError(f"the server answered an error: {reply}")
    return dict(reply["data"])


def tool_text(observation: dict[str, Any]) -> str:
    """The text of a tool call's result, wherever the observation keeps it."""
    return json.dumps(observation)


async def session(url: str) -> Any:
    import websockets

    ws = await websockets.connect(url, max_size=None, open_timeout=30)
    await ws.send(json.dumps({"type": "reset", "data": {}}))
    await asyncio.wait_for(ws.recv(), timeout=STEP_TIMEOUT_S)
    return ws


async def stepper(url: str, until: float, latencies: list[float]) -> None:
    ws = await session(url)
    frame = step_frame("true")
    try:
        while time.monotonic() < until:
            started = time.perf_counter()
            await call(ws, frame)
            latencies.append((time.perf_counter() - started) * 1000)
    finally:
        await ws.close()


def session_cgroups(server_pid: int, uid: int) -> list[Path]:
    """The session cgroups of `uid` under the server's own cgroups."""
    own: dict[str, str] = {}
    for line in Path(f"/proc/{server_pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for name in controllers.split(",") if controllers else [""]:
            own[name] = path
    found = []
    for root, point, kind, options in _mounts():
        key = next((c for c in ("memory", "pids") if c in options), None) if kind == "cgroup" else ""
        if key is None or key not in own:
            continue
        folder = _on_disk(root, point, own[key]) / CGROUP_PARENT / str(uid)
        if folder.is_dir() and folder not in found:
            found.append(folder)
    return found


def read_number(folder: Path, *names: str) -> int | None:
    for name in names:
        with contextlib.suppress(OSError, ValueError):
            return int((folder / name).read_text().split()[0])
    return None


def oom_kills(folder: Path) -> int:
    for name in ("memory.oom_control", "memory.events"):
        with contextlib.suppress(OSError):
            for line in (folder / name).read_text().splitlines():
                if line.startswith("oom_kill "):
                    return int(line.split()[1])
    return 0


async def abuser(url: str, server_pid: int, until: float, report: dict[str, Any]) -> None:
    ws = await session(url)
    try:
        uid = int(re.findall(r"\d+", tool_text(await call(ws, step_frame("id -u"))))[0])
        cgroups = session_cgroups(server_pid, uid)
        report["cgroups"] = [str(c) for c in cgroups]
        written: list[int] = []
        rounds = 0
        while time.monotonic() < until:
            text = tool_text(await call(ws, step_frame(ABUSE)))
            written += [int(n) for n in re.findall(r"written (\d+)", text)]
            rounds += 1
        memory = next((c for c in cgroups if (c / "memory.max").exists() or (c / "memory.limit_in_bytes").exists()), None)
        if memory is not None:
            report["peak_memory_bytes"] = read_number(memory, "memory.max_usage_in_bytes", "memory.peak")
            report["memory_limit_bytes"] = read_number(memory, "memory.limit_in_bytes", "memory.max")
            report["oom_kills"] = oom_kills(memory)
        report["rounds"] = rounds
        report["max_written_bytes"] = max(written, default=0)
        report["after"] = tool_text(await call(ws, step_frame("echo still-here")))
    finally:
        await ws.close()


async def phase(url: str, server_pid: int, sessions: int, seconds: float, abuse: bool) -> dict[str, Any]:
    until = time.monotonic() + seconds
    latencies: list[list[float]] = [[] for _ in range(sessions)]
    report: dict[str, Any] = {}
    tasks = [stepper(url, until, lat) for lat in latencies]
    if abuse:
        tasks.append(abuser(url, server_pid, until, report))
    await asyncio.gather(*tasks)
    merged = sorted(x for lat in latencies for x in lat)
    report.update(
        steps=len(merged),
        p50_ms=statistics.median(merged),
        p99_ms=merged[max(0, int(len(merged) * 0.99) - 1)],
    )
    return report


def start_server(sessions: int) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    argv = [
        str(SERVE), "serve", ENV_DIR, "--host", "127.0.0.1", "--port", str(port),
        "--max-sessions", str(sessions + 2), "--log-level", "warning", "--no-auth",
    ]  # fmt: skip
    # its output to a log, not ours (--json prints only the result)
    log = open(Path(tempfile.gettempdir()) / f"bench_session_bounds-{port}.log", "wb")
    with log:
        proc = subprocess.Popen(argv, cwd=REPO, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode} at start ({shlex.join(argv)})")
        with contextlib.suppress(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            wait_until_idle(proc.pid, timeout_s=30)
            return proc, f"ws://127.0.0.1:{port}/ws"
        time.sleep(0.2)
    stop(proc)
    raise RuntimeError(f"the server did not answer in {START_TIMEOUT_S:.0f} s")


def stop(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGINT)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


def measure(sessions: int, seconds: float) -> dict[str, Any]:
    proc, url = start_server(sessions)
    try:
        idle = asyncio.run(phase(url, proc.pid, sessions, seconds, abuse=False))
        abused = asyncio.run(phase(url, proc.pid, sessions, seconds, abuse=True))
    finally:
        stop(proc)
    limits = SandboxLimits()
    return {
        "sessions": sessions,
        "seconds": seconds,
        "limits": {"session_memory_bytes": limits.session_memory_bytes, "workspace_bytes": limits.workspace_bytes},
        "idle": idle,
        "abuse": abused,
        "p99_ratio": abused["p99_ms"] / idle["p99_ms"],
        "load": os.getloadavg()[0],  # the machine's, other work included
    }


def gib(n: int | None) -> str:
    return "n/a" if n is None else f"{n / 1024**3:.2f} GiB"


def markdown(result: dict[str, Any]) -> str:
    idle, abuse, limits = result["idle"], result["abuse"], result["limits"]
    return "\n".join([
        "## Session bounds",
        "",
        f"`python benchmarks/bench_session_bounds.py --sessions {result['sessions']} --seconds {result['seconds']:g}` "
        f"({date.today()}, {platform.machine()}, {os.cpu_count()} cores, load {result['load']:.1f}, "
        f"Python {platform.python_version()}): "
        f"`openenv serve {ENV_DIR}` as root, real WebSocket clients. One session calls `bash` with a command that "
        "starts 8 Python processes of 800 MiB each (6.4 GB, each under its per-process RLIMIT_AS) and writes "
        "40 files of 250 MB (10 GB), again and again; the others call `bash` with `true` in a loop.",
        "",
        "| the abusing session | tried | got | its limit |",
        "|---|---|---|---|",
        f"| memory (peak of its cgroup) | 6.4 GB | {gib(abuse.get('peak_memory_bytes'))} | "
        f"{gib(limits['session_memory_bytes'])} ({abuse.get('oom_kills', 0)} processes killed, {abuse.get('rounds', 0)} rounds) |",
        f"| bytes written (most in one round) | 10 GB | {gib(abuse.get('max_written_bytes'))} | {gib(limits['workspace_bytes'])} |",
        "",
        f"| {result['sessions']} other sessions, `bash true` | steps | p50 (ms) | p99 (ms) |",
        "|---|---|---|---|",
        f"| idle | {idle['steps']} | {idle['p50_ms']:.1f} | {idle['p99_ms']:.1f} |",
        f"| during the abuse | {abuse['steps']} | {abuse['p50_ms']:.1f} | {abuse['p99_ms']:.1f} |",
        "",
        f"p99 during the abuse / idle: {result['p99_ratio']:.2f} (target: under {TARGET_RATIO:g}).",
    ]) + "\n"  # fmt: skip


BEGIN, END = "<!-- bench_session_bounds: begin -->", "<!-- bench_session_bounds: end -->"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=3, help="other sessions stepping meanwhile")
    parser.add_argument("--seconds", type=float, default=20.0, help="length of each phase")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--write-docs", action="store_true", help="update docs/benchmarks.md")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root: session bounds (cgroups, tmpfs) need it")
    result = measure(args.sessions, args.seconds)
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        print(markdown(result))
    if args.write_docs:
        section = markdown(result)
        write_marked_section(REPO / "docs" / "benchmarks.md", BEGIN, END, f"{BEGIN}\n{section.rstrip()}\n{END}")


if __name__ == "__main__":
    main()
