"""Benchmark our echo server against OpenEnv's, in the same run, with the same client code.

Both servers serve the same echo environment (ours: `environments/echo` through
`openenv serve`; OpenEnv's: `benchmarks/openenv_echo_server.py` under
`.bench/openenv-venv`) and start as subprocesses on free loopback ports. A third,
trivial server (it answers every WebSocket frame with one fixed observation: no JSON, no
env) is the harness ceiling: what this client can drive on this machine.

Measured, per server:
    - WebSocket step round trip on one connection (median, p99), with two clients: the
      `websockets` library and a raw-frame client (`_rawws.RawWebSocket`, pre-built frames).
      Each server is left to settle first (its process idle: ours imports the official MCP
      server in the background after it starts answering).
    - HTTP step round trip with a keep-alive httpx client (median, p99).
    - MCP `tools/call` of the echo tool as a plain JSON-RPC `POST /mcp` (median, p99), stateless
      and in a session, and for ours also through the official `mcp` client
      (`ClientSession.call_tool`), interleaved with the same client against a bare `MCPServer`
      with one tool (`bare_mcp_server.py`): what our server adds to an MCP call.
    - Concurrency: N WebSocket sessions at once, each reset + S steps; sessions and steps that
      succeeded, steps/s, step latency under load, server RSS per idle session and after the
      steps. The server is restarted for every N, so each point starts clean. Ours also serves
      the echo environment with `BLOCKING = True` (`echo_blocking/`): its calls run on worker
      threads, as OpenEnv's do and as every environment's do by default.

Usage (from the repo root, with our dev venv; run `bash benchmarks/setup_openenv_venv.sh` once):
    .venv/bin/python benchmarks/bench_echo.py                  # full run, prints a table
    .venv/bin/python benchmarks/bench_echo.py --quick          # smoke run, < 1 min
    .venv/bin/python benchmarks/bench_echo.py --only openenv --sessions 100,1000
    .venv/bin/python benchmarks/bench_echo.py --write-docs     # also docs/benchmarks.md + plot
    .venv/bin/python benchmarks/bench_echo.py --repeat 2 --calm 1.5   # on a shared machine
    # the churn workload (10,000 sessions at once, each connect, reset, 10 steps, close), ours,
    # OpenEnv's and a bare `websockets` server taking turns, both clients; ~30 min on 2 cores:
    .venv/bin/python benchmarks/bench_echo.py --churn 10000 --churn-only --churn-rounds 2 --write-docs
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import math
import multiprocessing as mp
import os
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
from typing import Any, Self

from _churn import ChurnConfig, ChurnResult, churn_worker
from _docs import marked_sections, write_marked_section
from _proc import wait_until_idle
from _rawws import RawWebSocket, serve_fixed_reply
from _report import (
    ConcurrencyResult,
    LatencyStats,
    TargetResults,
    best_of,
    build_rows,
    ceiling_lines,
    markdown_report,
    percentile,
    print_table,
    target_lines,
    write_plot,
)

REPO_ROOT = Path(__file__).resolve().parent.parent
BENCH_DIR = REPO_ROOT / ".bench"
LOG_DIR = BENCH_DIR / "logs"
OPENENV_PYTHON = BENCH_DIR / "openenv-venv" / "bin" / "python"
TOOLS_PYTHON = BENCH_DIR / "tools" / "bin" / "python"
OURS_SERVE = REPO_ROOT / ".venv" / "bin" / "openenv"
BLOCKING_ECHO_DIR = "benchmarks/echo_blocking"
FREE_ECHO_DIR = "benchmarks/echo_blocking_free"
BARE_MCP_SERVER = REPO_ROOT / "benchmarks" / "bare_mcp_server.py"
BARE_WS_SERVER = REPO_ROOT / "benchmarks" / "bare_ws_echo_server.py"
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
SETTLE_TIMEOUT_S = 20.0
LATENCY_PHASE_TIMEOUT_S = 180.0


# --------------------------------------------------------------------------- small helpers


def raise_nofile_limit(need: int = 0) -> int:
    """Raise this process's soft RLIMIT_NOFILE to its hard limit (and the hard limit to `need`
    where allowed: as root, up to the kernel's `fs.nr_open`); return the new soft limit. The
    servers and client workers this process starts inherit it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY:
        hard = 1_048_576
    if hard < need:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (need, need))
            soft, hard = need, need
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
            "--log-level",
            "warning",  # no per-request access log, as for OpenEnv's server
            "--no-auth",  # tokenless, as OpenEnv's server
        )
    return Target("ours", argv, protocol)


def blocking_echo_target() -> Target:
    """Our server on the echo environment with `BLOCKING = True` (worker threads, as OpenEnv's)."""
    argv = (
        str(OURS_SERVE), "serve", BLOCKING_ECHO_DIR, "--host", "127.0.0.1", "--port", "{port}",
        "--max-sessions", "{max_sessions}", "--log-level", "warning", "--no-auth",
    )  # fmt: skip
    return Target("ours-blocking", argv, "ours")


def free_threaded_echo_target() -> Target:
    """The BLOCKING echo declared free-threaded (`THREAD_AFFINITY = False`): the shared pool,
    what every BLOCKING environment got before sessions were pinned to a thread."""
    argv = (
        str(OURS_SERVE), "serve", FREE_ECHO_DIR, "--host", "127.0.0.1", "--port", "{port}",
        "--max-sessions", "{max_sessions}", "--log-level", "warning", "--no-auth",
    )  # fmt: skip
    return Target("ours-blocking-free", argv, "ours")


def bare_mcp_target() -> Target:
    return Target("bare-mcp", (sys.executable, str(BARE_MCP_SERVER), "--port", "{port}"), "mcp")


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


def baseline_target(src: Path) -> Target:
    """Our server on the echo environment, but the SDK imported from `src` (a copy of an earlier
    commit's `openenv_sdk/`, e.g. `git archive <commit> openenv_sdk | tar -x -C DIR`): before and
    after in the same run."""
    argv = ("env", f"PYTHONPATH={src}", *ours_target(None, "ours").argv)
    return Target("ours-before", argv, "ours")


def bare_ws_target() -> Target:
    """A bare `websockets` echo server with the same JSON shapes: the floor of a WS step."""
    return Target("bare-ws", (sys.executable, str(BARE_WS_SERVER), "--port", "{port}"), "bare-ws")


def ceiling_target() -> Target:
    argv = (sys.executable, str(Path(__file__).resolve()), "--serve-ceiling", "{port}")
    return Target("ceiling", argv, "ceiling")


class ServerProcess:
    """A server subprocess on a free loopback port, stopped by its own process group id."""

    def __init__(self, target: Target, max_sessions: int, *, settle: bool = True) -> None:
        self.target = target
        self.max_sessions = max_sessions
        self.settle = settle
        self.settled_s = 0.0
        """Seconds waited after start for the server's own start-up work to end."""
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
        log = open(self.log_path, "wb")
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        try:
            self.proc = subprocess.Popen(
                argv,
                cwd=self.target.cwd,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                # Its own process group, so stop() reaches any workers it forks. It inherits
                # the file limit that main() raised.
                start_new_session=True,
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
            if self.target.protocol == "mcp" or asyncio.run(self._probe()):
                if self.settle:
                    self.settled_s = wait_until_idle(self.proc.pid, timeout_s=SETTLE_TIMEOUT_S)
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
        except Exception:
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

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_ceiling(port: int) -> None:
    """Run the harness ceiling server (see `_rawws.CeilingProtocol`) until SIGINT/SIGTERM."""
    raise_nofile_limit()
    try_uvloop()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        stop = loop.create_future()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set_result, None)
        await serve_fixed_reply(port, CEILING_REPLY.encode(), stop)

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
    url: str, steps: int, warmup: int, compression: str | None, *, raw: list[int] | None = None
) -> LatencyStats:
    """Steps with the `websockets` client; the samples (ns) also go to `raw` when given."""
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
    if raw is not None:
        raw.extend(samples)
    return LatencyStats.from_ns(samples)


async def raw_ws_step_latency(url: str, steps: int, warmup: int, *, raw: list[int] | None = None) -> LatencyStats:
    """The same steps with the raw-frame client (`_rawws.RawWebSocket`): less client time per
    step, so the server's share of the round trip shows more."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    samples: list[int] = []
    step_frame = RawWebSocket.frame(0x1, STEP_FRAME.encode())
    async with asyncio.timeout(LATENCY_PHASE_TIMEOUT_S):
        ws = await RawWebSocket.open(parts.hostname or "127.0.0.1", parts.port or 80, parts.path, 30.0)
        try:
            check_observation(await ws.request(RawWebSocket.frame(0x1, RESET_FRAME.encode()), 30.0))
            replies = []
            for i in range(warmup + steps):
                t0 = time.perf_counter_ns()
                reply = await ws.request(step_frame, 30.0)
                t1 = time.perf_counter_ns()
                if i >= warmup:
                    samples.append(t1 - t0)
                    replies.append(reply)
            for reply in replies:
                check_observation(reply)
        finally:
            await ws.close()
    if raw is not None:
        raw.extend(samples)
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


def jsonrpc(method: str, request_id: int, params: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        body["params"] = params
    return body


OURS_SESSION_HEADER = "X-OpenEnv-Session"
OURS_MCP_TOKEN_HEADER = "X-OpenEnv-MCP-Token"


class HttpDialect:
    """How one server takes an HTTP step and a plain JSON-RPC `tools/call` (see docs/protocol.md).

    ours: `POST /reset` without a session creates one, named by the `X-OpenEnv-Session` reply
    header; `/step` takes that header. A plain JSON-RPC `POST /mcp` (no MCP session, `Accept:
    application/json`) runs `tools/call` statelessly, or in a session when it carries the
    session's MCP token (`X-OpenEnv-MCP-Token`).

    openenv: `/reset` and `/step` are stateless (a fresh environment per request). `/mcp` is its
    own JSON-RPC subset; without `params.session_id` every call builds a fresh environment, with
    one (from `openenv/session/create`) it calls into that session's environment.
    """

    def __init__(self, protocol: str, base_url: str) -> None:
        import httpx

        self.protocol = protocol
        self.client = httpx.Client(base_url=base_url, timeout=30.0)
        self.step_headers: dict[str, str] = {}
        self.mcp_headers: dict[str, str] = {"accept": "application/json"}
        self.mcp_params: dict[str, Any] = {}
        self.tool = ECHO_TOOL
        self._rpc_id = 0

    def close(self) -> None:
        self.client.close()

    def _post(self, path: str, body: Any, headers: dict[str, str] | None = None) -> Any:
        r = self.client.post(path, json=body, headers=headers)
        if r.status_code not in (200, 201):
            raise ProtocolMismatch(f"POST {path} answered {r.status_code}: {r.text[:300]}")
        return r

    # -- HTTP step
    def http_reset(self) -> None:
        r = self._post("/reset", {})
        if self.protocol == "ours":
            session_id = r.headers.get(OURS_SESSION_HEADER)
            if not session_id:
                raise ProtocolMismatch(f"no {OURS_SESSION_HEADER} header in the /reset reply")
            self.step_headers = {OURS_SESSION_HEADER: session_id}
            self.client.cookies.clear()  # name the session by header only

    def http_step(self) -> None:
        r = self._post("/step", {"action": {"message": MESSAGE}}, self.step_headers)
        if "observation" not in r.json():
            raise ProtocolMismatch(f"POST /step: no observation in {r.text[:300]}")

    # -- MCP as plain JSON-RPC POSTs
    def _rpc(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self._rpc_id += 1
        reply = self._post("/mcp", jsonrpc(method, self._rpc_id, params), self.mcp_headers).json()
        if "error" in reply:
            raise ProtocolMismatch(f"{method}: {json.dumps(reply)[:300]}")
        return reply["result"]

    def mcp_setup(self, *, bound: bool) -> None:
        """Pick the echo tool from `tools/list`; with `bound`, call into one session's env."""
        self.mcp_headers = {"accept": "application/json"}
        self.mcp_params = {}
        if bound and self.protocol == "ours":
            r = self._post("/reset", {})
            session_id = r.headers[OURS_SESSION_HEADER]
            self.client.cookies.clear()
            info = self.client.get(f"/sessions/{session_id}").json()
            self.mcp_headers[OURS_MCP_TOKEN_HEADER] = info["mcp_token"]
        elif bound:
            session_id = self._rpc("openenv/session/create", {})["session_id"]
            self.mcp_params = {"session_id": session_id}
        names = [t["name"] for t in self._rpc("tools/list", dict(self.mcp_params))["tools"]]
        if ECHO_TOOL in names:
            self.tool = ECHO_TOOL
        else:
            echo_like = [n for n in names if "echo" in n]
            if not echo_like:
                raise ProtocolMismatch(f"no echo tool in tools/list: {names}")
            self.tool = echo_like[0]

    def mcp_call(self) -> None:
        params = {"name": self.tool, "arguments": {"message": MESSAGE}, **self.mcp_params}
        result = self._rpc("tools/call", params)
        if result.get("isError") or result.get("is_error"):
            raise ProtocolMismatch(f"tools/call failed: {json.dumps(result)[:300]}")

    def ours_mcp_url(self) -> str:
        """A fresh, reset session's MCP URL (`/mcp?session=TOKEN`) for the official client."""
        r = self._post("/reset", {})
        session_id = r.headers[OURS_SESSION_HEADER]
        self.client.cookies.clear()
        token = self.client.get(f"/sessions/{session_id}").json()["mcp_token"]
        return f"{str(self.client.base_url).rstrip('/')}/mcp?session={token}"


async def mcp_client_latency(
    url: str, count: int, warmup: int, *, raw: list[int] | None = None
) -> tuple[LatencyStats, str]:
    """The official `mcp` client: ClientSession.call_tool over streamable HTTP (samples also
    appended to `raw`, in ns, when given)."""
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    samples: list[int] = []
    async with (
        asyncio.timeout(LATENCY_PHASE_TIMEOUT_S),
        streamable_http_client(url) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        names = [t.name for t in (await session.list_tools()).tools]
        tool = ECHO_TOOL if ECHO_TOOL in names else next(n for n in names if "echo" in n)
        for i in range(warmup + count):
            t0 = time.perf_counter_ns()
            result = await session.call_tool(tool, {"message": MESSAGE})
            t1 = time.perf_counter_ns()
            if getattr(result, "is_error", None) or getattr(result, "isError", None):
                raise ProtocolMismatch(f"call_tool failed: {result}")
            if i >= warmup:
                samples.append(t1 - t0)
    if raw is not None:
        raw.extend(samples)
    return LatencyStats.from_ns(samples), tool


# --------------------------------------------------------------------------- concurrency


class WebsocketsConn:
    """The same API over the `websockets` client (`--conc-client websockets`)."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws

    @classmethod
    async def open(cls, url: str, compression: str | None) -> WebsocketsConn:
        import websockets

        return cls(await websockets.connect(url, **ws_connect_kwargs(compression)))

    async def request(self, frame: str, timeout_s: float) -> str | bytes:
        await self.ws.send(frame)
        async with asyncio.timeout(timeout_s):
            return await self.ws.recv()

    async def close(self) -> None:
        await self.ws.close()


def looks_like_observation(reply: str | bytes) -> bool:
    """Cheap check on the hot path; `check_observation` parses when it fails."""
    head = reply[:40]
    return (b"observation" in head) if isinstance(head, bytes) else ("observation" in head)


@dataclasses.dataclass
class WorkerConfig:
    url: str
    sessions: int
    steps: int
    connect_parallelism: int
    step_timeout_s: float
    phase_timeout_s: float
    compression: str | None
    client: str


def _worker_main(cfg: WorkerConfig, out: mp.Queue, go: Any, close: Any) -> None:
    raise_nofile_limit()
    try_uvloop()
    try:
        asyncio.run(_worker_async(cfg, out, go, close))
    except BaseException as e:
        out.put(("crash", os.getpid(), f"{type(e).__name__}: {e}"))


def _error_key(e: BaseException) -> str:
    while isinstance(e, BaseExceptionGroup) and e.exceptions:
        e = e.exceptions[0]
    text = str(e).splitlines()[0][:120] if str(e) else ""
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


async def _worker_async(cfg: WorkerConfig, out: mp.Queue, go: Any, close: Any) -> None:
    import gc
    from urllib.parse import urlsplit

    loop = asyncio.get_running_loop()
    errors: Counter[str] = Counter()
    gate = asyncio.Semaphore(cfg.connect_parallelism)
    url = urlsplit(cfg.url)
    if cfg.client == "raw":
        reset_frame: Any = RawWebSocket.frame(0x1, RESET_FRAME.encode())
        step_frame: Any = RawWebSocket.frame(0x1, STEP_FRAME.encode())
    else:
        reset_frame, step_frame = RESET_FRAME, STEP_FRAME

    async def open_session() -> Any:
        async with gate:
            try:
                if cfg.client == "raw":
                    conn: Any = await RawWebSocket.open(
                        url.hostname or "127.0.0.1", url.port or 80, url.path, cfg.step_timeout_s
                    )
                else:
                    conn = await WebsocketsConn.open(cfg.url, cfg.compression)
            except Exception as e:
                errors[f"connect: {_error_key(e)}"] += 1
                return None
            try:
                check_observation(await conn.request(reset_frame, cfg.step_timeout_s))
                return conn
            except Exception as e:
                errors[f"reset: {_error_key(e)}"] += 1
                with contextlib.suppress(Exception):
                    await conn.close()
                return None

    # Open phase: keep whatever opened by the deadline; cancel the rest.
    t0 = time.monotonic()
    tasks = [asyncio.ensure_future(open_session()) for _ in range(cfg.sessions)]
    done, pending = await asyncio.wait(tasks, timeout=cfg.phase_timeout_s)
    for task in pending:
        task.cancel()
    if pending:
        errors[f"not open within the {cfg.phase_timeout_s:.0f} s open phase"] += len(pending)
        await asyncio.gather(*pending, return_exceptions=True)
    conns = [t.result() for t in done if not t.cancelled() and t.exception() is None and t.result()]
    out.put(("ready", os.getpid(), len(conns), dict(errors), time.monotonic() - t0))
    errors.clear()

    if not await loop.run_in_executor(None, go.wait, cfg.phase_timeout_s * 3):
        errors["never told to go"] += 1

    # Step phase: every open session steps at once. The client's own heap is frozen so the
    # cyclic GC does not walk thousands of long-lived connections on every collection.
    gc.collect()
    gc.freeze()
    latencies: list[int] = []
    record = latencies.append
    perf_ns = time.perf_counter_ns

    async def run_steps(conn: Any) -> tuple[int, float]:
        ok = 0
        for _ in range(cfg.steps):
            try:
                t_send = perf_ns()
                reply = await conn.request(step_frame, cfg.step_timeout_s)
                record(perf_ns() - t_send)
                if not looks_like_observation(reply):
                    check_observation(reply)
                ok += 1
            except Exception as e:
                errors[f"step: {_error_key(e)}"] += 1
                break
        return ok, time.monotonic()

    step_tasks = [asyncio.ensure_future(run_steps(c)) for c in conns]
    done, pending = (
        await asyncio.wait(step_tasks, timeout=cfg.phase_timeout_s) if step_tasks else (set(), set())
    )
    for task in pending:
        task.cancel()
    if pending:
        errors[f"steps unfinished after the {cfg.phase_timeout_s:.0f} s step phase"] += len(pending)
        await asyncio.gather(*pending, return_exceptions=True)
    results = [t.result() for t in done if not t.cancelled() and t.exception() is None]
    ok_steps = sum(ok for ok, _ in results)
    ok_sessions = sum(1 for ok, _ in results if ok == cfg.steps)
    t_end = max((t for _, t in results), default=time.monotonic())
    out.put(("done", os.getpid(), ok_sessions, ok_steps, dict(errors), t_end, latencies))
    gc.unfreeze()

    await loop.run_in_executor(None, close.wait, cfg.phase_timeout_s * 3)
    with contextlib.suppress(Exception):
        async with asyncio.timeout(60):
            await asyncio.gather(*(c.close() for c in conns), return_exceptions=True)
    out.put(("closed", os.getpid()))


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
    target: Target,
    n: int,
    steps: int,
    args: argparse.Namespace,
    on_server: Callable[[ServerProcess], None] | None = None,
) -> ConcurrencyResult:
    """Start a fresh server, hold `n` sessions open, step them all at once, stop it.
    `on_server` is called with the server once it answers (`profile_step.py` attaches py-spy)."""
    result = ConcurrencyResult(sessions=n)
    procs_count = max(1, min(args.client_procs, math.ceil(n / 500)))
    shares = [n // procs_count + (1 if i < n % procs_count else 0) for i in range(procs_count)]
    phase_timeout_s = args.phase_timeout or max(60.0, n / 20)
    ctx = mp.get_context("spawn")
    out: mp.Queue = ctx.Queue()
    go, close = ctx.Event(), ctx.Event()
    server = ServerProcess(target, max_sessions=max(args.max_sessions, n + 16))
    workers: list[mp.process.BaseProcess] = []
    try:
        server.start()
        if on_server is not None:
            on_server(server)
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
                client=args.conc_client,
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
        time.sleep(1.0)  # the sessions stay open, each has stepped; nothing in flight
        result.stepped_rss_kib = server.rss_kib()
        result.stepped_threads = process_tree_threads(server.pid)
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
        for worker in workers:
            worker.join(10)
            if worker.is_alive() and worker.pid is not None:
                os.kill(worker.pid, signal.SIGKILL)
                worker.join(5)
        if server.proc is not None and server.proc.poll() is not None and not result.note:
            result.note = f"server exited with {server.proc.returncode}"
        server.stop()
    return result


def runnable_others(sample_s: float = 2.0) -> float:
    """Mean number of runnable tasks on the machine over `sample_s`, less this one reader."""
    samples = []
    deadline = time.monotonic() + sample_s
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, ValueError, IndexError):
            running = Path("/proc/loadavg").read_text().split()[3].split("/")[0]
            samples.append(int(running) - 1)
        time.sleep(0.1)
    return statistics.mean(samples) if samples else 0.0


def wait_for_calm(args: argparse.Namespace, what: str) -> None:
    """With `--calm N`: wait (at most `--calm-wait` s) until fewer than N other tasks are runnable."""
    if args.calm is None:
        return
    deadline = time.monotonic() + args.calm_wait
    busy = runnable_others()
    if busy < args.calm:
        return
    say(f"waiting for the machine to calm down before {what}: {busy:.1f} tasks runnable")
    while time.monotonic() < deadline:
        busy = runnable_others()
        if busy < args.calm:
            say(f"calm enough ({busy:.1f} runnable)")
            return
        time.sleep(3)
    say(f"still {busy:.1f} tasks runnable after {args.calm_wait:.0f} s; measuring anyway")
    args.calm_timeouts = getattr(args, "calm_timeouts", 0) + 1


def loadavg() -> str:
    try:
        return "load " + " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "load ?"


# --------------------------------------------------------------------------- the run


def _measure(label: str, res: TargetResults, fn: Callable[[], LatencyStats]) -> LatencyStats | None:
    try:
        return fn()
    except Exception as e:
        res.failures.append(f"{label}: {_error_key(e)}")
        return None


class WebsocketsStepper:
    """One `websockets` connection, stepped one message at a time (for the interleaved WS latency)."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws

    @classmethod
    async def open(cls, url: str, compression: str | None) -> WebsocketsStepper:
        import websockets

        ws = await websockets.connect(url, **ws_connect_kwargs(compression))
        await ws.send(RESET_FRAME)
        check_observation(await ws.recv())
        return cls(ws)

    async def step(self) -> str | bytes:
        await self.ws.send(STEP_FRAME)
        return await self.ws.recv()

    async def close(self) -> None:
        await self.ws.close()


class RawStepper:
    """One raw-frame connection (`_rawws.RawWebSocket`), stepped one message at a time."""

    def __init__(self, ws: RawWebSocket) -> None:
        self.ws = ws
        self.frame = RawWebSocket.frame(0x1, STEP_FRAME.encode())

    @classmethod
    async def open(cls, url: str, compression: str | None) -> RawStepper:
        from urllib.parse import urlsplit

        parts = urlsplit(url)
        ws = await RawWebSocket.open(parts.hostname or "127.0.0.1", parts.port or 80, parts.path, 30.0)
        check_observation(await ws.request(RawWebSocket.frame(0x1, RESET_FRAME.encode()), 30.0))
        return cls(ws)

    async def step(self) -> str | bytes:
        return await self.ws.request(self.frame, 30.0)

    async def close(self) -> None:
        await self.ws.close()


WS_BLOCK = 100
"""Timed steps per server per turn in the interleaved WS latency."""
WS_BLOCK_WARMUP = 2
"""Untimed steps at the start of each turn: the server slept while the others were stepped."""


async def interleaved_steps(
    urls: list[str], client: str, steps: int, warmup: int, compression: str | None
) -> list[list[int]]:
    """One connection per server; the servers take turns, `WS_BLOCK` timed steps each (A, B, C,
    A, B, C, ...), so that a burst of load from other work on a shared machine falls on all of
    them alike. A turn begins with `WS_BLOCK_WARMUP` untimed steps: a server that slept while the
    others were stepped wakes slower, which would otherwise be counted against every server.
    Returns each server's round-trip times, in ns."""
    opener = RawStepper if client == "raw" else WebsocketsStepper
    samples: list[list[int]] = [[] for _ in urls]
    async with asyncio.timeout(LATENCY_PHASE_TIMEOUT_S * len(urls)):
        conns = [await opener.open(url, compression) for url in urls]
        try:
            for conn in conns:
                for _ in range(warmup):
                    check_observation(await conn.step())
            while len(samples[0]) < steps:
                for conn, got in zip(conns, samples, strict=True):
                    for _ in range(WS_BLOCK_WARMUP):
                        check_observation(await conn.step())
                    for _ in range(min(WS_BLOCK, steps - len(got))):
                        t0 = time.perf_counter_ns()
                        reply = await conn.step()
                        got.append(time.perf_counter_ns() - t0)
                        if not looks_like_observation(reply):
                            check_observation(reply)
        finally:
            for conn in conns:
                with contextlib.suppress(Exception):
                    await conn.close()
    return samples


def run_ws_latency(targets: list[Target], args: argparse.Namespace, results: dict[str, TargetResults]) -> None:
    """Single-connection WS step latency of every server, with both clients, the servers taking
    turns (`interleaved_steps`): all servers run at once, each settled first."""
    servers: list[ServerProcess] = []
    try:
        for target in targets:
            server = ServerProcess(target, max_sessions=args.max_sessions)
            try:
                server.start()
            except (RuntimeError, ProtocolMismatch) as e:
                results[target.name].failures.append(f"ws latency: {str(e)[:500]}")
                continue
            servers.append(server)
            say(f"[{target.name}] server pid {server.pid} on port {server.port}, settled {server.settled_s:.1f} s")
        for client in ("websockets", "raw"):
            try:
                urls = [s.ws_url for s in servers]
                samples = asyncio.run(interleaved_steps(urls, client, args.ws_steps, args.warmup, args.ws_compression))
            except Exception as e:
                for server in servers:
                    results[server.target.name].failures.append(f"ws step ({client} client): {_error_key(e)}")
                continue
            for server, got in zip(servers, samples, strict=True):
                stats = LatencyStats.from_ns(got)
                if client == "raw":
                    results[server.target.name].ws_raw = stats
                else:
                    results[server.target.name].ws = stats
                say(f"[{server.target.name}] ws step, {client} client: {fmt_stats(stats)}")
    finally:
        for server in servers:
            server.stop()


def run_latency(target: Target, args: argparse.Namespace, res: TargetResults) -> None:
    """HTTP step and MCP latency of one server."""
    with ServerProcess(target, max_sessions=args.max_sessions) as server:
        say(f"[{target.name}] server pid {server.pid} on port {server.port}")
        dialect = HttpDialect(target.protocol, server.http_url)
        try:

            def http_bench() -> LatencyStats:
                dialect.http_reset()
                return time_calls(dialect.http_step, args.http_steps, args.warmup)

            res.http = _measure("http step", res, http_bench)
            say(f"[{target.name}] http step: {fmt_stats(res.http)}")

            def mcp_bench(bound: bool) -> LatencyStats:
                dialect.mcp_setup(bound=bound)
                return time_calls(dialect.mcp_call, args.mcp_calls, args.warmup)

            if target.protocol == "ours":
                res.mcp_post_refused = stateless_call_refused(dialect)
                say(f"[{target.name}] mcp tools/call POST, stateless: refused ({res.mcp_post_refused})")
            else:
                res.mcp_post = _measure("mcp post, stateless", res, lambda: mcp_bench(False))
                say(f"[{target.name}] mcp tools/call POST, stateless ({dialect.tool}): {fmt_stats(res.mcp_post)}")
            res.mcp_bound = _measure("mcp post, in a session", res, lambda: mcp_bench(True))
            say(f"[{target.name}] mcp tools/call POST, in a session: {fmt_stats(res.mcp_bound)}")
            if target.protocol == "ours":
                mcp_client_vs_bare(dialect, args, res, target.name)
        finally:
            dialect.close()


def stateless_call_refused(dialect: HttpDialect) -> str:
    """Ours refuses a `tools/call` outside any episode (OpenEnv runs it in a throwaway
    environment); the refusal's `data.code`, checked."""
    dialect.mcp_headers, dialect.mcp_params = {"accept": "application/json"}, {}
    body = jsonrpc("tools/call", 1, {"name": "echo", "arguments": {"message": MESSAGE}})
    reply = dialect.client.post("/mcp", json=body, headers=dialect.mcp_headers).json()
    code = (reply.get("error") or {}).get("data", {}).get("code")
    if code != "SESSION_REQUIRED":
        raise ProtocolMismatch(f"a stateless tools/call was not refused: {json.dumps(reply)[:300]}")
    return code


def mcp_client_vs_bare(dialect: HttpDialect, args: argparse.Namespace, res: TargetResults, name: str) -> None:
    """The official client against our `/mcp` and against a bare `MCPServer` with one tool,
    interleaved (A, B, A, B, ...) so that load on a shared machine falls on both alike."""
    rounds = 4
    count, warmup = max(1, args.mcp_calls // rounds), max(1, args.warmup // rounds)
    ours_samples: list[int] = []
    bare_samples: list[int] = []
    try:
        with ServerProcess(bare_mcp_target(), max_sessions=0) as bare:
            bare_url = f"{bare.http_url}/mcp"
            for _ in range(rounds):  # each round a fresh client session on each server
                asyncio.run(mcp_client_latency(dialect.ours_mcp_url(), count, warmup, raw=ours_samples))
                asyncio.run(mcp_client_latency(bare_url, count, warmup, raw=bare_samples))
    except Exception as e:
        res.failures.append(f"mcp client: {_error_key(e)}")
        return
    res.mcp_client = LatencyStats.from_ns(ours_samples)
    res.mcp_bare = LatencyStats.from_ns(bare_samples)
    say(f"[{name}] mcp ClientSession.call_tool: {fmt_stats(res.mcp_client)}")
    say(f"[bare MCPServer] mcp ClientSession.call_tool: {fmt_stats(res.mcp_bare)}")


# --------------------------------------------------------------------------- churn


def run_churn(target: Target, client: str, args: argparse.Namespace) -> ChurnResult:
    """A fresh server; `args.churn` sessions at once, each connect, reset, S steps, close; the
    server's RSS before, at its highest (sampled at each progress report) and right after (1 s
    after the last session closed). Progress is printed every ~10 s; the whole run is bounded
    by `--phase-timeout` (default max(60, N/20) s)."""
    n = args.churn
    result = ChurnResult(target=target.name, client=client, sessions=n)
    procs = max(1, min(args.churn_client_procs, n))
    shares = [n // procs + (1 if i < n % procs else 0) for i in range(procs)]
    ctx = mp.get_context("spawn")
    out: mp.Queue = ctx.Queue()
    server = ServerProcess(target, max_sessions=max(args.max_sessions, n + 16))
    # several client processes hold their sessions until every one's are open (one barrier)
    all_workers = ctx.Barrier(procs) if procs > 1 and not args.churn_paced else None
    workers: list[mp.process.BaseProcess] = []
    timeout_s = args.phase_timeout or max(60.0, n / 20)
    try:
        server.start()
        time.sleep(1.0)  # the probe session torn down
        result.baseline_rss_kib = result.peak_rss_kib = server.rss_kib()
        for share in shares:
            cfg = ChurnConfig(
                url=server.ws_url, sessions=share, steps=args.steps_per_session, client=client,
                connect_parallelism=args.connect_parallelism, timeout_s=args.step_timeout,
                reset_frame=RESET_FRAME, step_frame=STEP_FRAME, hold=not args.churn_paced,
                all_workers=all_workers, hold_timeout_s=timeout_s,
            )  # fmt: skip
            w = ctx.Process(target=churn_worker, args=(cfg, out), daemon=True)
            w.start()
            workers.append(w)
        done = _drain_churn(out, len(workers), timeout_s, server, result, n * args.steps_per_session)
        result.ok_sessions = sum(m[1] for m in done)
        result.ok_steps = sum(m[2] for m in done)
        result.wall_s = max(m[4] for m in done) - min(m[3] for m in done)
        errors: Counter[str] = Counter()
        for m in done:
            errors.update(m[5])
        result.errors = dict(errors.most_common(5))
        time.sleep(1.0)
        result.after_rss_kib = server.rss_kib()
    except (RuntimeError, TimeoutError, ProtocolMismatch) as e:
        result.note = str(e).splitlines()[0][:200]
    finally:
        for worker in workers:
            worker.join(10)
            if worker.is_alive() and worker.pid is not None:
                os.kill(worker.pid, signal.SIGKILL)
                worker.join(5)
        server.stop()
    return result


def _drain_churn(
    out: mp.Queue, count: int, timeout_s: float, server: ServerProcess, result: ChurnResult, total_steps: int
) -> list[tuple[Any, ...]]:
    """The churn workers' `done` messages; their progress reports print (every ~10 s) and sample
    the server's RSS. TimeoutError past `timeout_s`."""
    got: list[tuple[Any, ...]] = []
    progress: dict[int, tuple[int, int]] = {}
    started = time.monotonic()
    deadline, shown = started + timeout_s, started
    while len(got) < count:
        left = deadline - time.monotonic()
        if left <= 0:
            ended = sum(p[0] for p in progress.values())
            raise TimeoutError(f"not done within {timeout_s:.0f} s: {ended:,}/{result.sessions:,} sessions ended")
        try:
            msg = out.get(timeout=min(left, 1.0))
        except queue.Empty:
            continue
        if msg[0] == "crash":
            raise RuntimeError(f"client worker {msg[1]} crashed: {msg[2]}")
        if msg[0] == "progress":
            progress[msg[1]] = (msg[2], msg[3])
            result.peak_rss_kib = max(result.peak_rss_kib, server.rss_kib())
            if time.monotonic() - shown >= 10.0:
                shown = time.monotonic()
                ended, steps = (sum(p[i] for p in progress.values()) for i in (0, 1))
                say(
                    f"  [{result.target}] {shown - started:.0f} s: {ended:,}/{result.sessions:,} sessions ended, "
                    f"{steps:,}/{total_steps:,} steps, server RSS {result.peak_rss_kib / 1024:.0f} MiB at most so far"
                )
            continue
        if msg[0] != "done":
            raise RuntimeError(f"client worker sent {msg[0]!r}, expected 'done'")
        got.append(msg)
    return got


def run_ws_floor(targets: list[Target], args: argparse.Namespace) -> dict[str, list[float]]:
    """WS step median (ms) of each server with the `websockets` client, the servers taking turns,
    in `args.floor_rounds` rounds: the bare `websockets` server is the floor for that client."""
    servers: list[ServerProcess] = []
    medians: dict[str, list[float]] = {t.name: [] for t in targets}
    try:
        for target in targets:
            server = ServerProcess(target, max_sessions=args.max_sessions)
            server.start()
            servers.append(server)
        for _ in range(args.floor_rounds):
            samples = asyncio.run(
                interleaved_steps([s.ws_url for s in servers], "websockets", args.ws_steps, args.warmup, None)
            )
            for server, got in zip(servers, samples, strict=True):
                medians[server.target.name].append(statistics.median(got) / 1e6)
    finally:
        for server in servers:
            server.stop()
    return medians


CHURN_NOTES = [
    "Where a session's memory goes (tracemalloc of the server holding 1,000 reset echo sessions, "
    '2026-11-27): ~30.6 KiB a session before the changes below, ~26.8 KiB after. Nearly all of it is the '
    "stack a WebSocket connection runs on: uvicorn's protocol object, its `websockets` parser and the "
    "request's headers, the suspended coroutines of the ASGI middleware and routing chain, the "
    "transport's buffers; the session's own objects (`Session`, its runner and transcript, all "
    '`__slots__`, its ids and reaper hook) about 1 KiB, and the echo environment with its models ~0.6 '
    "KiB. Cut: uvicorn's per-connection `asyncio.Queue` and `asyncio.Event` (three deques and one, each "
    "with a 64-slot block) swapped for `server/_slim.py`'s (a list, a future only while someone waits; "
    "-3.7 KiB); the transcript's deque made at the first tool call (-0.7 KiB). The per-connection task "
    "(below) adds ~0.7 KiB. The idle servers' RSS (ours ~89 MiB with the official MCP server imported, "
    "OpenEnv's ~170 MiB) is most of what either holds right after the sessions close. After the sessions "
    "close, the server gives memory back (`server/_trim.py`, 2026-11-27): once Python's live objects have "
    'fallen a quarter below their high and stopped falling, a full collection (what closed sessions left '
    "in reference cycles, with all it held) and glibc's `malloc_trim(0)` on a worker thread (free pages "
    'anywhere in the C heap back to the OS; a no-op without glibc), off the step path (one counter read '
    'four times a second). 2,000 sessions at once, HEAD and after in the same run (`--baseline-src`, two '
    'rounds, one client process, this machine): RSS right after 145 -> 117-119 MiB (idle 89-90, peak '
    '144-145), about half of what the sessions added; the collection and the trim each gave part of it. '
    "What stays is pymalloc's: arenas that keep a few live objects each, and their empty pools, which no "
    'trim returns (after 2,000 sessions, ~700 more live objects than before them). '
    '`tests/server/test_memory_trim.py` fails without it.',
    "",
    "Where a step's time goes on our side (cProfile of the server, calls a WS step costs: "
    '`benchmarks/profile_step.py --calls`, the difference of two runs over one connection): 146 Python '
    'calls and coroutine resumptions a step before the second cuts, 114-116 after (the first cuts, 172 -> '
    "153, were counted another way). First cuts: the connection's loop runs in a task of its own, so a "
    'message no longer resumes the dozen ASGI middleware and routing coroutines that await it; the '
    "envelope is read by pydantic-core's JSON parser when it is the common one (pydantic validates the "
    'rest: the same fields, the same errors); a short text message skips the re-encode, UTF-8 and depth '
    "pass; a session verb's error net and metrics report are one coroutine, not three; whether a class "
    "has `step_async` is cached. Then (146 -> 116): a step's metrics are tallied in plain numbers (a "
    "count, a sum, a bucket found by `bisect`) and added to the registry's counters and histograms when "
    '`/metrics` is read, so the same series, names and buckets, for 3 calls a step instead of ~13 (locks, '
    'checks, a bucket search in Python); a sync step of a class that runs on the loop is called in place '
    '(no runner, no second `touch`), its plan (which method, sync or not, whether an action can be a tool '
    'call) worked out once per class; the action is validated and the observation dumped by '
    "pydantic-core's own calls, a frame fewer each; the slim queue waits without `getattr`/`setattr`; the "
    "connection's loop reads and sends text on the ASGI channel under starlette's `receive` and `send` "
    "(their state bookkeeping done in the loop; a socket the reaper closed still goes through starlette's "
    'refusal). The replies are byte-identical (HEAD and after, 23 messages, errors included; '
    '`tests/server/test_ws_replies.py` holds them to the ones recorded before). Then (114 -> 65): the '
    "connection's loop talks to the connection itself, `ServerWebSocketProtocol` (our subclass of "
    "uvicorn's sans-I/O protocol, reached through the scope): a small text frame (whole, under 126 bytes,"
    ' at a frame boundary, on an open connection) is unmasked and decoded there and queued as its `str`, '
    "with no `websockets` parser and no ASGI event dict, and the reply's frame is written at once, the "
    'bytes `websockets` would serialize (the ASGI `send` whenever the transport is paused, the connection'
    ' is not open or an extension is on); reading is paused only while a message waits unread, not after '
    'each one as uvicorn does; larger and fragmented messages, oversize, control frames and a starlette '
    'reader (the disconnect watch) go the ASGI way as before. On the hot path too: the envelope parsed to'
    " a tuple, `touch` and `guard_sync` inlined, the slim queue's wait inlined and its coroutine awaited "
    'by the loop directly. The replies are the same bytes (`tests/server/test_ws_replies.py`; '
    "`tests/server/test_ws_channel.py` reads the frames back byte for byte against `websockets`' "
    'serializer). WS step median, the servers taking turns (`--floor-rounds 9`, `websockets` client, this'
    ' loaded 2-core machine, two runs; `benchmarks/results/ws-floor-channel-local.log`): ours x0.98, '
    '0.99, 1.00, 1.06, 1.02, 0.72, 1.42, 1.44, 0.91 of bare-ws per round, and x0.93, 0.94, 0.94, 0.93, '
    '0.69, 0.86, 0.64, 1.02, 0.73; before (commit 55d8160) x1.22-1.64 and x0.99-1.20 in the same rounds; '
    'ours x0.59-0.89 of before. Left of the 65 (`profile_step.py --calls --by-function` lists them): the '
    "environment's own code and pydantic models (~11: the echo's observation, its state's validated "
    "assignment, `Environment.state`'s `typing.cast`), the metrics tally (5), the envelope's JSON in and "
    "out (~9), the session's step (~12), the frame's read, queue and write (~19).",
]
"""Fixed notes of the churn section: what the profiles showed and what was done (2026-11-27)."""


def churn_report(results: list[ChurnResult], floor: dict[str, list[float]], args: argparse.Namespace) -> str:
    """The churn section of docs/benchmarks.md (markdown, between its markers)."""
    by = {(r.target, r.client, r.round): r for r in results}
    lines = [
        "<!-- bench_echo_churn: begin -->",
        "## Churn: sessions that come and go",
        "",
        f"`python benchmarks/bench_echo.py {args.churn_command}`: "
        f"{args.churn:,} WebSocket sessions at once, each connects, resets, steps "
        f"{args.steps_per_session} times and closes (openings paced {args.connect_parallelism} at a time, {args.churn_client_procs} client process(es); "
        + ("each steps as soon as it has reset" if args.churn_paced else
           f"all {args.churn:,} open and reset before any steps, so every server holds them all at once")
        + "), "
        f"against a fresh server per row, the servers taking turns within each round ({args.churn_rounds} round(s)); "
        f"`bare-ws` is `benchmarks/bare_ws_echo_server.py`"
        + (f", `ours-before` our server from `{args.baseline_label}`" if args.baseline_src else "")
        + ". RSS is the server's: before, at its highest (sampled every ~2 s) and 1 s after the last session "
        f"closed. {args.load_text.capitalize()}; {os.cpu_count()} cores shared with other work (other jobs ran "
        "throughout), so compare rows of one round: ratios are within a round.",
        "",
        "| round | server | client | sessions OK | steps/s | RSS before (MiB) | RSS at most (MiB) | RSS right after (MiB) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r.round} | {r.target} | {r.client} | {r.ok_sessions:,}/{r.sessions:,} | {r.steps_per_s:,.0f} | "
            f"{r.baseline_rss_kib / 1024:.0f} | {r.peak_rss_kib / 1024:.0f} | {r.after_rss_kib / 1024:.0f} |"
            + (f" {r.note}" if r.note else "")
            + (f" errors: {r.errors}" if r.errors else "")
        )
    lines.append("")
    for round_no in sorted({r.round for r in results}):
        for client in args.churn_clients:
            for name in ("ours", "ours-before"):
                ours, theirs = by.get((name, client, round_no)), by.get(("openenv", client, round_no))
                if not (ours and theirs and theirs.peak_rss_kib):
                    continue
                bare = by.get(("bare-ws", client, round_no))
                lines.append(
                    f"- round {round_no}, {client} client, {name}/OpenEnv: "
                    + (f"steps/s x{ours.steps_per_s / theirs.steps_per_s:.2f}, " if theirs.steps_per_s else
                       f"OpenEnv's not done ({theirs.note or 'no step answered'}), ")
                    + f"RSS at most x{ours.peak_rss_kib / theirs.peak_rss_kib:.2f}"
                    + (f", RSS right after x{ours.after_rss_kib / theirs.after_rss_kib:.2f}" if theirs.after_rss_kib else "")
                    + (f" (what the churn added, at most: x{(ours.peak_rss_kib - ours.baseline_rss_kib) / grown:.2f})"
                       if (grown := theirs.peak_rss_kib - theirs.baseline_rss_kib) > 0 else "")
                    + (f"; {name}/bare-ws steps/s x{ours.steps_per_s / bare.steps_per_s:.2f}"
                       if bare and bare.steps_per_s else "")
                    + "."
                )  # fmt: skip
    lines += ["", *CHURN_NOTES]
    if floor:
        lines += [
            "",
            f"WS step median with the `websockets` client, one connection, {args.ws_steps} steps per round, "
            f"the servers taking turns ({args.floor_rounds} rounds; `bare-ws` is `benchmarks/bare_ws_echo_server.py`, "
            "the same JSON shapes on the bare `websockets` server: the floor for this client). Within a round "
            "the servers ran under the same load; between rounds it changed, so compare within a row's round:",
            "",
            "| server | median per round (ms) | x bare (per round) |",
            "|---|---|---|",
        ]
        floor_bare = floor.get("bare-ws") or []
        for name, medians in floor.items():
            ratio = ", ".join(f"{m / b:.2f}" for m, b in zip(medians, floor_bare, strict=False)) if floor_bare else ""
            lines.append(f"| {name} | {', '.join(f'{m:.3f}' for m in medians)} | {ratio} |")
    lines.append("<!-- bench_echo_churn: end -->")
    return "\n".join(lines) + "\n"


def run_churn_section(targets: list[Target], args: argparse.Namespace) -> None:
    by_name = {t.name: t for t in [*targets, bare_ws_target()]}
    churn_targets = [by_name[n] for n in ("ours", "ours-before", "bare-ws", "openenv") if n in by_name]
    need = args.churn + 1024
    if raise_nofile_limit(need) < need:
        say(f"warning: the open-file limit is under {need:,}: sessions past it will fail to connect")
    results: list[ChurnResult] = []
    for round_no in range(1, args.churn_rounds + 1):
        for client in args.churn_clients:
            for target in churn_targets:
                wait_for_calm(args, f"{target.name} churn")
                say(f"[{target.name}] churn round {round_no}: {args.churn:,} sessions, {client} client ({loadavg()}) ...")
                r = run_churn(target, client, args)
                r.round = round_no
                results.append(r)
                say(
                    f"[{target.name}] churn round {round_no}, {client} client: {r.ok_sessions:,}/{r.sessions:,} OK, "
                    f"{r.steps_per_s:,.0f} steps/s, RSS {r.baseline_rss_kib / 1024:.0f} -> at most "
                    f"{r.peak_rss_kib / 1024:.0f} -> {r.after_rss_kib / 1024:.0f} MiB in {r.wall_s:.0f} s"
                    + (f", note: {r.note}" if r.note else "") + (f", errors: {r.errors}" if r.errors else "")
                )
    floor = run_ws_floor(churn_targets, args) if args.floor_rounds else {}
    for name, medians in floor.items():
        say(f"[{name}] ws step median (websockets client) per round: {', '.join(f'{m:.3f}' for m in medians)} ms")
    args.load_text = f"{loadavg()} after the run"
    report = churn_report(results, floor, args)
    print(report)
    if args.write_docs:
        write_marked_section(DOCS_MD, "<!-- bench_echo_churn: begin -->", "<!-- bench_echo_churn: end -->", report)
        say(f"wrote the churn section of {DOCS_MD.relative_to(REPO_ROOT)}")


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def fmt_stats(s: LatencyStats | None) -> str:
    return "failed" if s is None else f"median {s.median_ms:.3f} ms, p99 {s.p99_ms:.3f} ms (n={s.count})"


# --------------------------------------------------------------------------- reporting


# --------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small counts; finishes in under a minute")
    p.add_argument("--only", choices=("ours", "openenv"), help="measure one server only")
    p.add_argument(
        "--sessions",
        type=lambda s: [int(x) for x in s.split(",") if x.strip()],
        help="concurrency sweep, comma separated (default 100,1000,4000,10000; --quick: 100)",
    )
    p.add_argument("--steps-per-session", type=int, default=10)
    p.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="run each concurrency point this many times, servers interleaved; report the "
        "best steps/s and the worst success count (for shared, noisy machines)",
    )
    p.add_argument("--ws-steps", type=int, help="timed WS steps (default 2000)")
    p.add_argument("--http-steps", type=int, help="timed HTTP steps (default 1000)")
    p.add_argument("--mcp-calls", type=int, help="timed MCP calls (default 500)")
    p.add_argument("--warmup", type=int, help="untimed calls first (default 100)")
    p.add_argument(
        "--client-procs",
        type=int,
        default=max(2, os.cpu_count() or 2),
        help="client processes driving the concurrency test (default: nproc, at least 2)",
    )
    p.add_argument(
        "--connect-parallelism",
        type=int,
        default=256,
        help="connection handshakes in flight per client process",
    )
    p.add_argument("--step-timeout", type=float, default=60.0, help="seconds one reply may take")
    p.add_argument("--max-sessions", type=int, default=20_000, help="--max-sessions given to servers")
    p.add_argument(
        "--ws-compression",
        choices=("deflate",),
        default=None,
        help="offer permessage-deflate like a default websockets client (off by default)",
    )
    p.add_argument(
        "--conc-client",
        choices=("raw", "websockets"),
        default="raw",
        help="client for the concurrency test: a minimal asyncio-protocol WebSocket client "
        "(default) or the websockets library",
    )
    p.add_argument(
        "--phase-timeout",
        type=float,
        help="seconds for each concurrency phase (open, step); default max(60, N/20)",
    )
    p.add_argument("--no-ceiling", action="store_true", help="skip the harness ceiling")
    p.add_argument(
        "--free-threaded-echo",
        action="store_true",
        help="also serve the BLOCKING echo with THREAD_AFFINITY = False (the shared pool, no pinning)",
    )
    p.add_argument(
        "--no-blocking-echo",
        action="store_true",
        help="skip our server on the echo environment with BLOCKING = True (sync calls on worker threads)",
    )
    p.add_argument(
        "--calm",
        type=float,
        help="before each measurement, wait until fewer than this many other tasks are runnable "
        "(sampled over 2 s; for shared machines, e.g. --calm 1)",
    )
    p.add_argument("--calm-wait", type=float, default=300.0, help="the most seconds one --calm wait may take")
    p.add_argument("--no-concurrency", action="store_true", help="latency only")
    p.add_argument("--no-latency", action="store_true", help="concurrency sweep only")
    p.add_argument(
        "--ours-cmd",
        help="command for our server, with {port} and {max_sessions} "
        "(default: .venv/bin/openenv serve environments/echo ...)",
    )
    p.add_argument(
        "--ours-protocol",
        choices=("ours", "openenv"),
        default="ours",
        help="HTTP/MCP dialect of the 'ours' command (openenv: develop against OpenEnv)",
    )
    p.add_argument(
        "--churn", type=int, metavar="N", help="also run the churn workload: N sessions at once, each connect, "
        "reset, --steps-per-session steps, close; and the WS step floor (a bare websockets server)"
    )
    p.add_argument("--churn-only", action="store_true", help="only the churn workload and the WS floor")
    p.add_argument(
        "--churn-clients", type=lambda v: v.split(","), default=["websockets", "raw"], help="clients for --churn"
    )
    p.add_argument(
        "--churn-client-procs",
        type=int,
        default=max(1, min(4, (os.cpu_count() or 1) // 4)),
        help="client processes for --churn (default: a quarter of the cores, 1 to 4: the server is one "
        "process, so a few clients keep it busy; 4 on 16 cores)",
    )
    p.add_argument("--churn-rounds", type=int, default=1, help="rounds of --churn, the servers taking turns in each")
    p.add_argument(
        "--churn-paced",
        action="store_true",
        help="each --churn session steps as soon as it has reset (by default all N are open, reset, before any steps: "
        "N at once on every server, however fast it answers)",
    )
    p.add_argument(
        "--baseline-src",
        type=Path,
        help="also run our server with the SDK from this folder (a copy of an earlier commit's openenv_sdk/), "
        "as `ours-before`, in the churn and the WS floor",
    )
    p.add_argument("--baseline-label", default="an earlier commit", help="what --baseline-src is, for the docs")
    p.add_argument("--floor-rounds", type=int, default=3, help="rounds of the WS floor comparison (0: none)")
    p.add_argument("--write-docs", action="store_true", help="write docs/benchmarks.md and the plot")
    p.add_argument("--json", type=Path, help="also dump raw results as JSON to this file")
    p.add_argument("--serve-ceiling", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    quick = args.quick
    defaults = {
        "sessions": [100] if quick else [100, 1000, 4000, 10000],
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
        if not args.no_blocking_echo and not args.ours_cmd:
            targets.append(blocking_echo_target())
        if args.free_threaded_echo:
            targets.append(free_threaded_echo_target())
    if args.only in (None, "openenv"):
        if not OPENENV_PYTHON.exists():
            say(f"error: {OPENENV_PYTHON} not found; run: bash benchmarks/setup_openenv_venv.sh")
            return 2
        targets.append(openenv_target())
    if not args.no_ceiling:
        targets.append(ceiling_target())

    if args.baseline_src:
        targets.append(baseline_target(args.baseline_src.resolve()))
    args.churn_command = " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
    if args.churn_only:
        if not args.churn:
            say("error: --churn-only needs --churn N")
            return 2
        run_churn_section(targets, args)
        return 0

    results: dict[str, TargetResults] = {t.name: TargetResults(t.name) for t in targets}
    started = time.monotonic()
    load_before = loadavg()
    say(f"{load_before} on {os.cpu_count()} cores before the run")
    if not args.no_latency:
        wait_for_calm(args, "WS latency")
        run_ws_latency(targets, args, results)
    for target in targets if not args.no_latency else []:
        if target.name in ("ceiling", "ours-blocking"):  # WebSocket only
            continue
        wait_for_calm(args, f"{target.name} latency")
        try:
            run_latency(target, args, results[target.name])
        except (RuntimeError, ProtocolMismatch) as e:
            results[target.name].failures.append(f"latency run: {str(e)[:500]}")
            say(f"[{target.name}] latency run failed: {e}")
    if not args.no_concurrency:
        for n in args.sessions:
            runs: dict[str, list[ConcurrencyResult]] = {t.name: [] for t in targets}
            for attempt in range(args.repeat):
                for target in targets:
                    wait_for_calm(args, f"{target.name} at {n} sessions")
                    say(
                        f"[{target.name}] {n} concurrent sessions (run {attempt + 1}/{args.repeat}, {loadavg()}) ..."
                    )
                    r = run_concurrency(target, n, args.steps_per_session, args)
                    runs[target.name].append(r)
                    say(
                        f"[{target.name}] {n} sessions: {r.ok_sessions}/{n} OK, {r.steps_per_s:,.0f} steps/s, "
                        f"open {r.open_s:.1f} s, p99 {r.step_p99_ms:.1f} ms, "
                        f"{r.kib_per_idle_session:.1f} KiB/idle session, {r.server_threads} server threads"
                        + (f", note: {r.note}" if r.note else "")
                        + (f", errors: {r.errors}" if r.errors else "")
                    )
            for name, attempts in runs.items():
                results[name].concurrency.append(best_of(attempts))
                results[name].concurrency_runs.extend(attempts)
    if args.churn:
        run_churn_section(targets, args)
    say(f"total time {time.monotonic() - started:.0f} s; {loadavg()} after the run")
    args.load_text = f"{load_before} before the run, {loadavg()} after it (1, 5, 15 min averages)"

    rows = build_rows(results.get("ours"), results.get("openenv"), results.get("ours-blocking"))
    extra = ceiling_lines(results)
    ours_res = results.get("ours")
    if ours_res is not None and ours_res.mcp_client and ours_res.mcp_bare:
        extra.append(
            f"MCP ClientSession.call_tool against a bare MCPServer with one tool (same client, interleaved): "
            f"median {ours_res.mcp_bare.median_ms:.3f} ms, p99 {ours_res.mcp_bare.p99_ms:.3f} ms; ours/bare "
            f"x{ours_res.mcp_client.median_ms / ours_res.mcp_bare.median_ms:.2f} (median)."
        )
    if args.ws_compression:
        extra.append(f"WebSocket compression offered by the client: {args.ws_compression}")
    for name, res in results.items():
        for failure in res.failures:
            extra.append(f"{name}: {failure}")
    print_table(
        rows,
        extra
        + [
            "Targets: " + line
            for line in target_lines(results.get("ours"), results.get("openenv"), results.get("ours-blocking"))
        ],
    )
    if args.json:
        args.json.write_text(
            json.dumps({k: dataclasses.asdict(v) for k, v in results.items()}, indent=2, default=str)
        )
    if args.write_docs:
        plot_note = (
            write_plot(results, args.steps_per_session, DOCS_PLOT, [sys.executable, str(TOOLS_PYTHON)])
            if not args.no_concurrency
            else "(no concurrency run)"
        )
        DOCS_MD.parent.mkdir(parents=True, exist_ok=True)
        report = markdown_report(rows, extra, results, args, plot_note)
        # Keep the sections other benchmarks write into the page (bench_container's, between markers).
        kept = marked_sections(DOCS_MD.read_text()) if DOCS_MD.exists() else ""
        DOCS_MD.write_text(report.rstrip("\n") + ("\n\n" + kept if kept else "") + "\n")
        say(
            f"wrote {DOCS_MD.relative_to(REPO_ROOT)}"
            + ("" if plot_note else f" and {DOCS_PLOT.relative_to(REPO_ROOT)}")
        )
        if plot_note:
            say(plot_note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
