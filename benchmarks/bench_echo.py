"""Benchmark our echo server against OpenEnv's, in the same run, with the same client code.

Both servers serve the same echo environment (ours: `environments/echo` through
`openenv serve`; OpenEnv's: `benchmarks/openenv_echo_server.py` under
`.bench/openenv-venv`) and start as subprocesses on free loopback ports. A third,
trivial server (a raw `websockets` echo that answers every frame with a fixed
observation) is the ceiling: what this client can drive on this machine.

Measured, per server:
    - WebSocket step round trip on one connection (median, p99).
    - HTTP step round trip with a keep-alive httpx client (median, p99).
    - MCP `tools/call` of `echo_message` as a plain JSON-RPC `POST /mcp` (median, p99), and
      for ours also through the official `mcp` client (`ClientSession.call_tool`).
    - Concurrency: N WebSocket sessions at once, each reset + S steps; sessions and steps that
      succeeded, steps/s, step latency under load, server RSS per idle session. The server is
      restarted for every N, so each point starts clean.

Usage (from the repo root, with our dev venv; run `bash benchmarks/setup_openenv_venv.sh` once):
    .venv/bin/python benchmarks/bench_echo.py                  # full run, prints a table
    .venv/bin/python benchmarks/bench_echo.py --quick          # smoke run, < 1 min
    .venv/bin/python benchmarks/bench_echo.py --only openenv --sessions 100,1000
    .venv/bin/python benchmarks/bench_echo.py --write-docs     # also docs/benchmarks.md + plot
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import datetime
import json
import math
import multiprocessing as mp
import os
import platform
import queue
import resource
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
BENCH_DIR = REPO_ROOT / ".bench"
LOG_DIR = BENCH_DIR / "logs"
OPENENV_PYTHON = BENCH_DIR / "openenv-venv" / "bin" / "python"
OURS_SERVE = REPO_ROOT / ".venv" / "bin" / "openenv"
DOCS_MD = REPO_ROOT / "docs" / "benchmarks.md"
DOCS_PLOT = REPO_ROOT / "docs" / "img" / "bench_concurrency.png"

ECHO_TOOL = "echo_message"
MESSAGE = "hi"
RESET_FRAME = json.dumps({"type": "reset", "data": {}})
STEP_FRAME = json.dumps({"type": "step", "data": {"message": MESSAGE}})
CEILING_REPLY = json.dumps(
    {
        "type": "observation",
        "data": {"observation": {"echoed_message": MESSAGE}, "reward": 0.2, "done": False},
    }
)

SERVER_START_TIMEOUT_S = 90.0
SERVER_STOP_TIMEOUT_S = 15.0
LATENCY_PHASE_TIMEOUT_S = 180.0


# --------------------------------------------------------------------------- small helpers


def raise_nofile_limit() -> int:
    """Raise this process's soft RLIMIT_NOFILE to its hard limit; return the new soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY:
        hard = 1_048_576
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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


def process_tree_rss_kib(root_pid: int) -> int:
    """VmRSS of `root_pid` plus all its descendants, in KiB (0 if gone)."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # Field 4 (ppid) follows the ")" that closes the command name.
        ppid = int(stat[stat.rindex(b")") + 2 :].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    total = 0
    todo = [root_pid]
    while todo:
        pid = todo.pop()
        todo.extend(children.get(pid, []))
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
                        break
        except OSError:
            pass
    return total


def process_tree_threads(root_pid: int) -> int:
    try:
        with open(f"/proc/{root_pid}/status") as f:
            for line in f:
                if line.startswith("Threads:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def try_uvloop() -> None:
    with contextlib.suppress(ImportError):
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


# --------------------------------------------------------------------------- the servers


@dataclasses.dataclass(frozen=True)
class Target:
    """One server under test and how to talk to it over HTTP and MCP.

    Attributes:
        name: Label in the results ("ours", "openenv", "ceiling").
        argv: Command template; `{port}` and `{max_sessions}` are filled in.
        protocol: Which HTTP/MCP dialect: "ours", "openenv", or "ceiling" (WebSocket only).
        cwd: Working directory for the server process.
    """

    name: str
    argv: tuple[str, ...]
    protocol: str
    cwd: Path = REPO_ROOT


def ours_target(cmd: str | None, protocol: str) -> Target:
    if cmd:
        argv = tuple(shlex.split(cmd))
    else:
        argv = (
            str(OURS_SERVE),
            "serve",
            "environments/echo",
            "--host",
            "127.0.0.1",
            "--port",
            "{port}",
            "--max-sessions",
            "{max_sessions}",
        )
    return Target("ours", argv, protocol)


def openenv_target() -> Target:
    argv = (
        str(OPENENV_PYTHON),
        str(REPO_ROOT / "benchmarks" / "openenv_echo_server.py"),
        "--port",
        "{port}",
        "--max-sessions",
        "{max_sessions}",
    )
    return Target("openenv", argv, "openenv")


def ceiling_target() -> Target:
    argv = (sys.executable, str(Path(__file__).resolve()), "--serve-ceiling", "{port}")
    return Target("ceiling", argv, "ceiling")


def _child_preexec() -> None:
    # New process group (so stop() reaches workers a server may fork), and the
    # same raised file limit the client has.
    os.setsid()
    raise_nofile_limit()


class ServerProcess:
    """A server subprocess on a free loopback port, stopped by its own process group id."""

    def __init__(self, target: Target, max_sessions: int) -> None:
        self.target = target
        self.max_sessions = max_sessions
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path: Path | None = None

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/ws"

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        if self.proc is None:
            raise RuntimeError(f"{self.target.name} server is not running")
        return self.proc.pid

    def rss_kib(self) -> int:
        return process_tree_rss_kib(self.pid)

    def start(self) -> None:
        self.port = free_port()
        argv = [a.format(port=self.port, max_sessions=self.max_sessions) for a in self.target.argv]
        LOG_DIR.mkdir(parents=True, exist_ok=True)
        self.log_path = LOG_DIR / f"{self.target.name}-{self.port}.log"
        log = open(self.log_path, "wb")  # noqa: SIM115 - handed to the child
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        try:
            self.proc = subprocess.Popen(
                argv,
                cwd=self.target.cwd,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                preexec_fn=_child_preexec,
            )
        finally:
            log.close()
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"{self.target.name} server exited with {self.proc.returncode} at start:\n"
                    f"{self.log_tail()}"
                )
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    pass
            except OSError:
                time.sleep(0.1)
                continue
            if asyncio.run(self._probe()):
                return
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(
            f"{self.target.name} server not ready after {SERVER_START_TIMEOUT_S:.0f} s "
            f"(argv: {shlex.join(argv)}):\n{self.log_tail()}"
        )

    async def _probe(self) -> bool:
        """One reset + step over WebSocket: the server is up and speaks the protocol."""
        import websockets

        try:
            async with asyncio.timeout(10):
                async with websockets.connect(self.ws_url, **ws_connect_kwargs(None)) as ws:
                    await ws.send(RESET_FRAME)
                    check_observation(await ws.recv())
                    await ws.send(STEP_FRAME)
                    check_observation(await ws.recv())
            return True
        except ProtocolMismatch:
            raise
        except Exception:  # refused, timed out, or a handshake error while the app starts
            return False

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGINT)
        try:
            self.proc.wait(SERVER_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(SERVER_STOP_TIMEOUT_S)

    def log_tail(self, lines: int = 30) -> str:
        if self.log_path is None or not self.log_path.exists():
            return "(no log)"
        text = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])

    def __enter__(self) -> ServerProcess:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_ceiling(port: int) -> None:
    """The sanity ceiling: raw `websockets`, a fixed reply per frame, no parsing, no env."""
    raise_nofile_limit()
    try_uvloop()
    from websockets.asyncio.server import serve

    async def handler(ws: Any) -> None:
        with contextlib.suppress(Exception):
            async for _ in ws:
                await ws.send(CEILING_REPLY)

    async def main() -> None:
        stop = asyncio.get_running_loop().create_future()
        for sig in (signal.SIGINT, signal.SIGTERM):
            asyncio.get_running_loop().add_signal_handler(sig, stop.set_result, None)
        async with serve(
            handler, "127.0.0.1", port, compression=None, ping_interval=None, backlog=16384
        ):
            await stop

    asyncio.run(main())


# --------------------------------------------------------------------------- client pieces


class ProtocolMismatch(RuntimeError):
    """A server answered, but not with what the echo protocol says."""


def check_observation(raw: str | bytes) -> dict[str, Any]:
    reply = json.loads(raw)
    if reply.get("type") != "observation":
        raise ProtocolMismatch(f"expected an observation frame, got: {str(raw)[:300]}")
    return reply


def ws_connect_kwargs(compression: str | None) -> dict[str, Any]:
    return {
        "compression": compression,
        "ping_interval": None,  # idle sessions must stay idle (no keepalive traffic)
        "open_timeout": 60,
        "close_timeout": 10,
        "proxy": None,
        "max_size": 2**22,
    }


async def ws_step_latency(
    url: str, steps: int, warmup: int, compression: str | None
) -> LatencyStats:
    import websockets

    samples: list[int] = []
    async with asyncio.timeout(LATENCY_PHASE_TIMEOUT_S):
        async with websockets.connect(url, **ws_connect_kwargs(compression)) as ws:
            await ws.send(RESET_FRAME)
            check_observation(await ws.recv())
            replies = []
            for i in range(warmup + steps):
                t0 = time.perf_counter_ns()
                await ws.send(STEP_FRAME)
                reply = await ws.recv()
                t1 = time.perf_counter_ns()
                if i >= warmup:
                    samples.append(t1 - t0)
                    replies.append(reply)
            for reply in replies:
                check_observation(reply)
    return LatencyStats.from_ns(samples)


def time_calls(call: Callable[[], None], count: int, warmup: int) -> LatencyStats:
    deadline = time.monotonic() + LATENCY_PHASE_TIMEOUT_S
    samples: list[int] = []
    for i in range(warmup + count):
        if time.monotonic() > deadline:
            raise TimeoutError(f"latency phase over {LATENCY_PHASE_TIMEOUT_S:.0f} s")
        t0 = time.perf_counter_ns()
        call()
        t1 = time.perf_counter_ns()
        if i >= warmup:
            samples.append(t1 - t0)
    return LatencyStats.from_ns(samples)


def jsonrpc_call_tool(request_id: int) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": ECHO_TOOL, "arguments": {"message": MESSAGE}},
    }


class HttpDialect:
    """How one server takes an HTTP step and a JSON-RPC `tools/call` (see docs/protocol.md)."""

    def __init__(self, protocol: str, base_url: str) -> None:
        import httpx

        self.protocol = protocol
        self.client = httpx.Client(
            base_url=base_url, timeout=30.0, headers={"connection": "keep-alive"}
        )
        self.step_headers: dict[str, str] = {}
        self.mcp_headers = {"accept": "application/json, text/event-stream"}
        self._rpc_id = 0

    def close(self) -> None:
        self.client.close()

    # -- HTTP step
    def http_reset(self) -> None:
        if self.protocol == "ours":
            r = self.client.post("/reset", json={})
            r.raise_for_status()
            session_id = r.headers.get("x-session-id") or r.json().get("session_id")
            if not session_id:
                raise ProtocolMismatch(f"no session id in /reset reply: {r.text[:300]}")
            self.step_headers = {"x-session-id": session_id}
        else:  # OpenEnv: stateless, every request builds a fresh env
            self.client.post("/reset", json={}).raise_for_status()

    def http_step(self) -> None:
        if self.protocol == "ours":
            body: dict[str, Any] = {"action": {"message": MESSAGE}}
        else:
            body = {"action": {"message": MESSAGE}}
        r = self.client.post("/step", json=body, headers=self.step_headers)
        if r.status_code != 200:
            raise ProtocolMismatch(f"POST /step answered {r.status_code}: {r.text[:300]}")

    # -- MCP over plain JSON-RPC POST
    def mcp_setup(self) -> None:
        if self.protocol != "ours":
            return  # OpenEnv's /mcp is its own JSON-RPC subset: no initialize
        init = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "bench_echo", "version": "0"},
            },
        }
        r = self.client.post("/mcp", json=init, headers=self.mcp_headers)
        if r.status_code != 200:
            raise ProtocolMismatch(f"MCP initialize answered {r.status_code}: {r.text[:300]}")
        session = r.headers.get("mcp-session-id")
        if session:
            self.mcp_headers = {**self.mcp_headers, "mcp-session-id": session}
            self.client.post(
                "/mcp",
                json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                headers=self.mcp_headers,
            )

    def mcp_call(self) -> None:
        self._rpc_id += 1
        r = self.client.post("/mcp", json=jsonrpc_call_tool(self._rpc_id), headers=self.mcp_headers)
        if r.status_code != 200:
            raise ProtocolMismatch(f"POST /mcp answered {r.status_code}: {r.text[:300]}")
        text = r.text
        if text.startswith("event:") or text.startswith("data:"):  # SSE framing
            text = next(
                line[5:] for line in text.splitlines() if line.startswith("data:")
            )
        reply = json.loads(text)
        if "error" in reply or reply.get("result", {}).get("isError") or (
            reply.get("result", {}).get("is_error")
        ):
            raise ProtocolMismatch(f"tools/call failed: {text[:300]}")


async def mcp_client_latency(url: str, count: int, warmup: int) -> LatencyStats:
    """The official `mcp` client: ClientSession.call_tool over streamable HTTP."""
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    samples: list[int] = []
    async with asyncio.timeout(LATENCY_PHASE_TIMEOUT_S):
        async with streamable_http_client(url) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                for i in range(warmup + count):
                    t0 = time.perf_counter_ns()
                    result = await session.call_tool(ECHO_TOOL, {"message": MESSAGE})
                    t1 = time.perf_counter_ns()
                    if result.is_error if hasattr(result, "is_error") else result.isError:
                        raise ProtocolMismatch(f"call_tool failed: {result}")
                    if i >= warmup:
                        samples.append(t1 - t0)
    return LatencyStats.from_ns(samples)


# --------------------------------------------------------------------------- concurrency


@dataclasses.dataclass
class WorkerConfig:
    url: str
    sessions: int
    steps: int
    connect_parallelism: int
    step_timeout_s: float
    phase_timeout_s: float
    compression: str | None


def _worker_main(cfg: WorkerConfig, out: mp.Queue, go: Any, close: Any) -> None:
    raise_nofile_limit()
    try_uvloop()
    try:
        asyncio.run(_worker_async(cfg, out, go, close))
    except BaseException as e:  # report, never hang the parent
        out.put(("crash", os.getpid(), f"{type(e).__name__}: {e}"))


def _error_key(e: BaseException) -> str:
    text = str(e).splitlines()[0][:120] if str(e) else ""
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


async def _worker_async(cfg: WorkerConfig, out: mp.Queue, go: Any, close: Any) -> None:
    import websockets

    loop = asyncio.get_running_loop()
    errors: Counter[str] = Counter()
    gate = asyncio.Semaphore(cfg.connect_parallelism)

    async def open_session() -> Any:
        async with gate:
            try:
                ws = await websockets.connect(cfg.url, **ws_connect_kwargs(cfg.compression))
            except Exception as e:
                errors[f"connect: {_error_key(e)}"] += 1
                return None
            try:
                await ws.send(RESET_FRAME)
                check_observation(await asyncio.wait_for(ws.recv(), cfg.step_timeout_s))
                return ws
            except Exception as e:
                errors[f"reset: {_error_key(e)}"] += 1
                await ws.close()
                return None

    t0 = time.monotonic()
    try:
        async with asyncio.timeout(cfg.phase_timeout_s):
            sessions = await asyncio.gather(*(open_session() for _ in range(cfg.sessions)))
    except TimeoutError:
        errors["connect phase timed out"] += 1
        sessions = []
    open_ws = [ws for ws in sessions if ws is not None]
    out.put(("ready", os.getpid(), len(open_ws), dict(errors), time.monotonic() - t0))
    errors.clear()

    if not await loop.run_in_executor(None, go.wait, cfg.phase_timeout_s * 3):
        errors["never told to go"] += 1

    latencies: list[int] = []

    async def run_steps(ws: Any) -> tuple[int, float]:
        ok = 0
        for _ in range(cfg.steps):
            try:
                t_send = time.perf_counter_ns()
                await ws.send(STEP_FRAME)
                reply = await asyncio.wait_for(ws.recv(), cfg.step_timeout_s)
                latencies.append(time.perf_counter_ns() - t_send)
                check_observation(reply)
                ok += 1
            except Exception as e:
                errors[f"step: {_error_key(e)}"] += 1
                break
        return ok, time.monotonic()

    try:
        async with asyncio.timeout(cfg.phase_timeout_s):
            results = await asyncio.gather(*(run_steps(ws) for ws in open_ws))
    except TimeoutError:
        errors["step phase timed out"] += 1
        results = []
    ok_steps = sum(ok for ok, _ in results)
    ok_sessions = sum(1 for ok, _ in results if ok == cfg.steps)
    t_end = max((t for _, t in results), default=time.monotonic())
    out.put(("done", os.getpid(), ok_sessions, ok_steps, dict(errors), t_end, latencies))

    await loop.run_in_executor(None, close.wait, cfg.phase_timeout_s * 3)
    with contextlib.suppress(Exception):
        async with asyncio.timeout(60):
            await asyncio.gather(*(ws.close() for ws in open_ws), return_exceptions=True)
    out.put(("closed", os.getpid()))


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
    errors: dict[str, int] = dataclasses.field(default_factory=dict)
    note: str = ""

    @property
    def all_ok(self) -> bool:
        return self.ok_sessions == self.sessions and not self.note

    @property
    def kib_per_idle_session(self) -> float:
        if self.opened == 0:
            return math.nan
        return (self.idle_rss_kib - self.baseline_rss_kib) / self.opened


def _drain(out: mp.Queue, kind: str, count: int, timeout_s: float) -> list[tuple[Any, ...]]:
    got: list[tuple[Any, ...]] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < count:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"{len(got)}/{count} client workers reported {kind!r}")
        try:
            msg = out.get(timeout=min(left, 1.0))
        except queue.Empty:
            continue
        if msg[0] == "crash":
            raise RuntimeError(f"client worker {msg[1]} crashed: {msg[2]}")
        if msg[0] != kind:
            raise RuntimeError(f"client worker sent {msg[0]!r}, expected {kind!r}")
        got.append(msg)
    return got


def run_concurrency(
    target: Target, n: int, steps: int, args: argparse.Namespace
) -> ConcurrencyResult:
    """Start a fresh server, hold `n` sessions open, step them all at once, stop it."""
    result = ConcurrencyResult(sessions=n)
    procs_count = max(1, min(args.client_procs, math.ceil(n / 500)))
    shares = [n // procs_count + (1 if i < n % procs_count else 0) for i in range(procs_count)]
    phase_timeout_s = max(60.0, n / 50)
    ctx = mp.get_context("spawn")
    out: mp.Queue = ctx.Queue()
    go, close = ctx.Event(), ctx.Event()
    server = ServerProcess(target, max_sessions=max(args.max_sessions, n + 16))
    workers: list[mp.process.BaseProcess] = []
    try:
        server.start()
        time.sleep(1.0)  # let the probe session be torn down
        result.baseline_rss_kib = server.rss_kib()
        for share in shares:
            cfg = WorkerConfig(
                url=server.ws_url,
                sessions=share,
                steps=steps,
                connect_parallelism=args.connect_parallelism,
                step_timeout_s=args.step_timeout,
                phase_timeout_s=phase_timeout_s,
                compression=args.ws_compression,
            )
            w = ctx.Process(target=_worker_main, args=(cfg, out, go, close), daemon=True)
            w.start()
            workers.append(w)
        errors: Counter[str] = Counter()
        ready = _drain(out, "ready", len(workers), phase_timeout_s + 60)
        result.opened = sum(m[2] for m in ready)
        result.open_s = max(m[4] for m in ready)
        for m in ready:
            errors.update(m[3])
        time.sleep(1.0)  # idle sessions: nothing in flight
        result.idle_rss_kib = server.rss_kib()
        result.server_threads = process_tree_threads(server.pid)
        t_go = time.monotonic()
        go.set()
        done = _drain(out, "done", len(workers), phase_timeout_s + 60)
        result.ok_sessions = sum(m[2] for m in done)
        result.ok_steps = sum(m[3] for m in done)
        t_end = max(m[5] for m in done)
        latencies = sorted(x / 1e6 for m in done for x in m[6])
        for m in done:
            errors.update(m[4])
        if latencies:
            result.step_p50_ms = statistics.median(latencies)
            result.step_p99_ms = percentile(latencies, 99)
        result.steps_per_s = result.ok_steps / max(t_end - t_go, 1e-9)
        result.errors = dict(errors.most_common(5))
        close.set()
        with contextlib.suppress(TimeoutError):
            _drain(out, "closed", len(workers), 90)
        if server.proc is not None and server.proc.poll() is not None:
            result.note = f"server exited with {server.proc.returncode}"
    except (RuntimeError, TimeoutError, ProtocolMismatch) as e:
        result.note = str(e).splitlines()[0][:200]
    finally:
        go.set()
        close.set()
        for w in workers:
            w.join(10)
            if w.is_alive() and w.pid is not None:
                os.kill(w.pid, signal.SIGKILL)
                w.join(5)
        if server.proc is not None and server.proc.poll() is not None and not result.note:
            result.note = f"server exited with {server.proc.returncode}"
        server.stop()
    return result


# --------------------------------------------------------------------------- the run


@dataclasses.dataclass
class TargetResults:
    name: str
    ws: LatencyStats | None = None
    http: LatencyStats | None = None
    mcp_post: LatencyStats | None = None
    mcp_client: LatencyStats | None = None
    concurrency: list[ConcurrencyResult] = dataclasses.field(default_factory=list)
    failures: list[str] = dataclasses.field(default_factory=list)


def _measure(label: str, res: TargetResults, fn: Callable[[], LatencyStats]) -> LatencyStats | None:
    try:
        return fn()
    except Exception as e:
        res.failures.append(f"{label}: {_error_key(e)}")
        return None


def run_latency(target: Target, args: argparse.Namespace, res: TargetResults) -> None:
    with ServerProcess(target, max_sessions=args.max_sessions) as server:
        say(f"[{target.name}] server pid {server.pid} on port {server.port}")
        res.ws = _measure(
            "ws step",
            res,
            lambda: asyncio.run(
                ws_step_latency(server.ws_url, args.ws_steps, args.warmup, args.ws_compression)
            ),
        )
        say(f"[{target.name}] ws step: {fmt_stats(res.ws)}")
        if target.protocol == "ceiling":
            return
        dialect = HttpDialect(target.protocol, server.http_url)
        try:
            def http_bench() -> LatencyStats:
                dialect.http_reset()
                return time_calls(dialect.http_step, args.http_steps, args.warmup)

            res.http = _measure("http step", res, http_bench)
            say(f"[{target.name}] http step: {fmt_stats(res.http)}")

            def mcp_bench() -> LatencyStats:
                dialect.mcp_setup()
                return time_calls(dialect.mcp_call, args.mcp_calls, args.warmup)

            res.mcp_post = _measure("mcp post", res, mcp_bench)
            say(f"[{target.name}] mcp tools/call (POST): {fmt_stats(res.mcp_post)}")
        finally:
            dialect.close()
        if target.protocol == "ours":
            res.mcp_client = _measure(
                "mcp client",
                res,
                lambda: asyncio.run(
                    mcp_client_latency(f"{server.http_url}/mcp", args.mcp_calls, args.warmup)
                ),
            )
            say(f"[{target.name}] mcp ClientSession.call_tool: {fmt_stats(res.mcp_client)}")


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def fmt_stats(s: LatencyStats | None) -> str:
    return "failed" if s is None else f"median {s.median_ms:.3f} ms, p99 {s.p99_ms:.3f} ms (n={s.count})"


# --------------------------------------------------------------------------- reporting


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
        if self.ours is not None and self.theirs and not math.isnan(self.ours) and not math.isnan(
            self.theirs
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


def build_rows(ours: TargetResults | None, theirs: TargetResults | None) -> list[Row]:
    def get(res: TargetResults | None, attr: str, field: str) -> float | None:
        stats = getattr(res, attr) if res else None
        return getattr(stats, field) if stats else None

    rows = [
        Row("WS step median (ms)", get(ours, "ws", "median_ms"), get(theirs, "ws", "median_ms"), "lower"),
        Row("WS step p99 (ms)", get(ours, "ws", "p99_ms"), get(theirs, "ws", "p99_ms"), "lower"),
        Row("HTTP step median (ms)", get(ours, "http", "median_ms"), get(theirs, "http", "median_ms"), "lower"),
        Row("HTTP step p99 (ms)", get(ours, "http", "p99_ms"), get(theirs, "http", "p99_ms"), "lower"),
        Row(
            "MCP tools/call, JSON-RPC POST, median (ms)",
            get(ours, "mcp_post", "median_ms"),
            get(theirs, "mcp_post", "median_ms"),
            "lower",
        ),
        Row(
            "MCP tools/call, JSON-RPC POST, p99 (ms)",
            get(ours, "mcp_post", "p99_ms"),
            get(theirs, "mcp_post", "p99_ms"),
            "lower",
        ),
        Row(
            "MCP ClientSession.call_tool median (ms)",
            get(ours, "mcp_client", "median_ms"),
            None,
            "lower",
            theirs_text="n/a (no MCP transport)",
        ),
        Row("MCP ClientSession.call_tool p99 (ms)", get(ours, "mcp_client", "p99_ms"), None, "lower"),
    ]
    by_n: dict[int, dict[str, ConcurrencyResult]] = {}
    for label, res in (("ours", ours), ("theirs", theirs)):
        for r in res.concurrency if res else []:
            by_n.setdefault(r.sessions, {})[label] = r
    for n in sorted(by_n):
        o, t = by_n[n].get("ours"), by_n[n].get("theirs")

        def ok_text(r: ConcurrencyResult | None) -> str | None:
            if r is None:
                return None
            text = f"{r.ok_sessions}/{r.sessions}"
            return text + ("" if r.all_ok else " ✗")

        rows.append(Row(f"{n} sessions: sessions fully OK", None, None, "higher", ours_text=ok_text(o), theirs_text=ok_text(t)))
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
    lo, lt = _largest_ok(ours.concurrency) if ours else None, _largest_ok(theirs.concurrency) if theirs else None
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


def ceiling_lines(ceiling: TargetResults | None) -> list[str]:
    if ceiling is None:
        return []
    lines = [
        "Harness ceiling (trivial raw `websockets` echo server, same client code): "
        f"WS step median {ceiling.ws.median_ms:.3f} ms, p99 {ceiling.ws.p99_ms:.3f} ms"
        if ceiling.ws
        else "Harness ceiling: WS latency run failed"
    ]
    for r in ceiling.concurrency:
        lines.append(
            f"Harness ceiling at {r.sessions} sessions: {r.steps_per_s:,.0f} steps/s "
            f"({r.ok_sessions}/{r.sessions} sessions OK{'' if r.all_ok else ', ' + (r.note or 'failures')})"
        )
    return lines


def print_table(rows: list[Row], extra: list[str]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="openenv-sdk echo server vs OpenEnv 0.10.0 echo server")
    for col, justify in (("metric", "left"), ("ours", "right"), ("openenv", "right"), ("ours/openenv", "right"), ("better", "left")):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for row in rows:
        table.add_row(*row.cells())
    console = Console()
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


def markdown_report(
    rows: list[Row], extra: list[str], results: dict[str, TargetResults], args: argparse.Namespace, plot_note: str
) -> str:
    lines = [
        "# Benchmarks: echo environment, ours vs OpenEnv",
        "",
        "Generated by `benchmarks/bench_echo.py --write-docs`; do not edit by hand.",
        "",
        "Both servers serve the same echo environment and are measured in the same run, with the",
        "same client code, on loopback:",
        "",
        "- ours: `openenv serve environments/echo` (this repo).",
        "- OpenEnv: `openenv==0.10.0`, `benchmarks/openenv_echo_server.py` (an `MCPEnvironment` with a",
        "  FastMCP `echo_message` tool plus a plain `{\"message\": str}` action, served by `create_app`),",
        "  with uvloop and httptools installed like ours (a bare `pip install openenv` has neither).",
        "",
        "## Machine",
        "",
        *machine_description(),
        "",
        "## Method",
        "",
        f"- WS step: one connection, reset, {args.warmup} warm-up steps, then {args.ws_steps} timed steps "
        '`{"type":"step","data":{"message":"hi"}}`, one at a time (`websockets` client, no compression).',
        f"- HTTP step: keep-alive `httpx.Client`, {args.http_steps} `POST /step`. OpenEnv's HTTP step is "
        "stateless (a fresh environment per request); ours steps a session named by a header.",
        f"- MCP: {args.mcp_calls} JSON-RPC `tools/call` of `echo_message` as plain `POST /mcp`; for ours also "
        "the official `mcp` client (`ClientSession.call_tool`, streamable HTTP). OpenEnv's `/mcp` is its "
        "own JSON-RPC subset, which the official client cannot use.",
        f"- Concurrency: N WebSocket sessions open at once (connect + reset), then all step together, "
        f"{args.steps_per_session} steps each; a session counts as OK only if all its steps succeed. steps/s = "
        "successful steps / wall time of the step phase. Client: "
        f"{args.client_procs} processes, asyncio + uvloop. The server is restarted for every N. Memory per "
        "idle session = (server RSS with N idle sessions after reset − RSS before) / N.",
        "- Ratio column: ours / OpenEnv; the `better` column says which direction wins.",
        "",
        "## Results",
        "",
        "| metric | ours | openenv | ours/openenv | better |",
        "| --- | ---: | ---: | ---: | --- |",
    ]
    for row in rows:
        lines.append("| " + " | ".join(row.cells()) + " |")
    lines += ["", *[f"- {line}" for line in extra]]
    errors = []
    for name, res in results.items():
        for failure in res.failures:
            errors.append(f"- {name}: {failure}")
        for r in res.concurrency:
            if r.errors or r.note:
                detail = "; ".join(f"{k} ×{v}" for k, v in r.errors.items())
                errors.append(f"- {name}, {r.sessions} sessions: {r.note} {detail}".rstrip())
    if errors:
        lines += ["", "## Failures seen", "", *errors]
    lines += ["", "## Steps/s vs concurrent sessions", ""]
    lines.append(plot_note or "![steps/s vs concurrent sessions](img/bench_concurrency.png)")
    lines += [
        "",
        "## Reproduce",
        "",
        "```bash",
        "bash benchmarks/setup_openenv_venv.sh",
        f".venv/bin/python benchmarks/bench_echo.py --sessions {','.join(map(str, args.sessions))} --write-docs",
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
style = {"ours": ("o-", "tab:blue"), "openenv": ("s-", "tab:orange"), "ceiling": ("^--", "tab:gray")}
labels = {"ours": "ours (openenv-sdk)", "openenv": "OpenEnv 0.10.0", "ceiling": "harness ceiling (raw websockets echo)"}
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


def write_plot(results: dict[str, TargetResults], steps: int) -> str:
    """Render the concurrency plot; return "" on success or a note saying why it was skipped."""
    candidates = [sys.executable, str(OPENENV_PYTHON)]
    python = None
    for candidate in candidates:
        if not Path(candidate).exists():
            continue
        probe = subprocess.run([candidate, "-c", "import matplotlib"], capture_output=True)
        if probe.returncode == 0:
            python = candidate
            break
    if python is None:
        return "(plot skipped: matplotlib is not installed in our venv or in .bench/openenv-venv)"
    series = {
        name: [(r.sessions, r.steps_per_s, r.all_ok) for r in res.concurrency]
        for name, res in results.items()
    }
    DOCS_PLOT.parent.mkdir(parents=True, exist_ok=True)
    data = {
        "series": series,
        "steps": steps,
        "out": str(DOCS_PLOT),
        "machine": f"{os.cpu_count()} cores",
    }
    proc = subprocess.run([python, "-c", PLOT_SCRIPT, json.dumps(data)], capture_output=True, text=True)
    if proc.returncode != 0:
        return f"(plot failed: {proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else proc.returncode})"
    return ""


# --------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small counts; finishes in under a minute")
    p.add_argument("--only", choices=("ours", "openenv"), help="measure one server only")
    p.add_argument(
        "--sessions",
        type=lambda s: [int(x) for x in s.split(",") if x.strip()],
        help="concurrency sweep, comma separated (default 100,1000,4000,10000; --quick: 50,200)",
    )
    p.add_argument("--steps-per-session", type=int, default=10)
    p.add_argument("--ws-steps", type=int, help="timed WS steps (default 2000)")
    p.add_argument("--http-steps", type=int, help="timed HTTP steps (default 1000)")
    p.add_argument("--mcp-calls", type=int, help="timed MCP calls (default 500)")
    p.add_argument("--warmup", type=int, help="untimed calls first (default 100)")
    p.add_argument("--client-procs", type=int, default=max(2, os.cpu_count() or 2),
                   help="client processes driving the concurrency test (default: nproc, at least 2)")
    p.add_argument("--connect-parallelism", type=int, default=256,
                   help="connection handshakes in flight per client process")
    p.add_argument("--step-timeout", type=float, default=60.0, help="seconds one reply may take")
    p.add_argument("--max-sessions", type=int, default=20_000, help="--max-sessions given to servers")
    p.add_argument("--ws-compression", choices=("deflate",), default=None,
                   help="offer permessage-deflate like a default websockets client (off by default)")
    p.add_argument("--no-ceiling", action="store_true", help="skip the raw websockets ceiling run")
    p.add_argument("--no-concurrency", action="store_true", help="latency only")
    p.add_argument("--ours-cmd", help="command for our server, with {port} and {max_sessions} "
                   "(default: .venv/bin/openenv serve environments/echo ...)")
    p.add_argument("--ours-protocol", choices=("ours", "openenv"), default="ours",
                   help="HTTP/MCP dialect of the 'ours' command (openenv: develop against OpenEnv)")
    p.add_argument("--write-docs", action="store_true", help="write docs/benchmarks.md and the plot")
    p.add_argument("--json", type=Path, help="also dump raw results as JSON to this file")
    p.add_argument("--serve-ceiling", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    quick = args.quick
    defaults = {
        "sessions": [50, 200] if quick else [100, 1000, 4000, 10000],
        "ws_steps": 300 if quick else 2000,
        "http_steps": 200 if quick else 1000,
        "mcp_calls": 100 if quick else 500,
        "warmup": 20 if quick else 100,
    }
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.serve_ceiling:
        serve_ceiling(args.serve_ceiling)
        return 0
    raise_nofile_limit()
    try_uvloop()

    targets: list[Target] = []
    if args.only in (None, "ours"):
        if not args.ours_cmd and not OURS_SERVE.exists():
            say(f"error: {OURS_SERVE} not found; install the repo into .venv or pass --ours-cmd")
            return 2
        targets.append(ours_target(args.ours_cmd, args.ours_protocol))
    if args.only in (None, "openenv"):
        if not OPENENV_PYTHON.exists():
            say(f"error: {OPENENV_PYTHON} not found; run: bash benchmarks/setup_openenv_venv.sh")
            return 2
        targets.append(openenv_target())
    if not args.no_ceiling:
        targets.append(ceiling_target())

    results: dict[str, TargetResults] = {t.name: TargetResults(t.name) for t in targets}
    started = time.monotonic()
    for target in targets:
        try:
            run_latency(target, args, results[target.name])
        except (RuntimeError, ProtocolMismatch) as e:
            results[target.name].failures.append(f"latency run: {str(e)[:500]}")
            say(f"[{target.name}] latency run failed: {e}")
    if not args.no_concurrency:
        for n in args.sessions:
            for target in targets:
                say(f"[{target.name}] {n} concurrent sessions ...")
                r = run_concurrency(target, n, args.steps_per_session, args)
                results[target.name].concurrency.append(r)
                say(
                    f"[{target.name}] {n} sessions: {r.ok_sessions}/{n} OK, {r.steps_per_s:,.0f} steps/s, "
                    f"open {r.open_s:.1f} s, p99 {r.step_p99_ms:.1f} ms, "
                    f"{r.kib_per_idle_session:.1f} KiB/idle session, {r.server_threads} server threads"
                    + (f", note: {r.note}" if r.note else "")
                    + (f", errors: {r.errors}" if r.errors else "")
                )
    say(f"total time {time.monotonic() - started:.0f} s")

    rows = build_rows(results.get("ours"), results.get("openenv"))
    extra = ceiling_lines(results.get("ceiling"))
    if args.ws_compression:
        extra.append(f"WebSocket compression offered by the client: {args.ws_compression}")
    for name, res in results.items():
        for failure in res.failures:
            extra.append(f"{name}: {failure}")
    print_table(rows, extra)
    if args.json:
        args.json.write_text(json.dumps({k: dataclasses.asdict(v) for k, v in results.items()}, indent=2, default=str))
    if args.write_docs:
        plot_note = write_plot(results, args.steps_per_session) if not args.no_concurrency else "(no concurrency run)"
        DOCS_MD.parent.mkdir(parents=True, exist_ok=True)
        DOCS_MD.write_text(markdown_report(rows, extra, results, args, plot_note))
        say(f"wrote {DOCS_MD.relative_to(REPO_ROOT)}" + ("" if plot_note else f" and {DOCS_PLOT.relative_to(REPO_ROOT)}"))
        if plot_note:
            say(plot_note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
