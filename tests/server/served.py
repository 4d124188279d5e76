"""`openenv serve` in a subprocess on a free loopback port, for tests that need the real process
(its RSS, its signals)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
from fixtures.servers import wait_until

__all__ = ["ECHO_DIR", "rss_bytes", "serve_folder"]

ECHO_DIR = Path(__file__).resolve().parents[2] / "environments" / "echo"


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/health", timeout=1).status_code == 200
    except httpx.TransportError:
        return False


@contextlib.contextmanager
def serve_folder(
    env_dir: Path, *options: str, env: dict[str, str] | None = None, start_timeout_s: float = 30.0
) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """Run `openenv serve ENV_DIR --no-auth OPTIONS...`; yields the process and its base URL.
    The process is killed on leaving the block if it still runs."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    command = [sys.executable, "-m", "openenv_sdk.cli.main", "serve", str(env_dir), "--port", str(port)]
    command += ["--log-level", "warning", "--no-auth", *options]
    process = subprocess.Popen(
        command, env={**os.environ, **(env or {})}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    url = f"http://127.0.0.1:{port}"
    try:
        if not wait_until(lambda: _healthy(url) or process.poll() is not None, timeout_s=start_timeout_s):
            raise AssertionError(f"openenv serve did not answer /health within {start_timeout_s} s")
        if process.poll() is not None:
            output = process.stdout.read().decode()  # type: ignore[union-attr]
            raise AssertionError(f"openenv serve exited {process.returncode}: {output}")
        yield process, url
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(10)
        process.stdout.close()  # type: ignore[union-attr]


def rss_bytes(pid: int) -> int:
    """A process's resident set size now (Linux `/proc`)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for process {pid}")
