"""`openenv serve ENV_DIR` in a subprocess: serves, honours its options, stops cleanly on SIGINT."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fixtures.servers import ask, wait_until, ws_url
from websockets.sync.client import connect

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="sends SIGINT")

MANIFEST = """\
spec_version: 1
name: marker
version: 0.0.1
type: space
runtime: fastapi
port: 8000
environment: marker_env:MarkerEnvironment
"""

ENVIRONMENT = '''\
"""Writes a line to $OPENENV_TEST_MARKER each time an instance is closed."""

import os

from openenv_sdk import Environment, tool


class MarkerEnvironment(Environment):
    """Marks its closing in a file."""

    @tool
    def ping(self) -> str:
        """Answer pong."""
        return "pong"

    def close(self) -> None:
        with open(os.environ["OPENENV_TEST_MARKER"], "a", encoding="utf-8") as marker:
            marker.write("closed\\n")
'''


@pytest.fixture(scope="module")
def env_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("serve") / "marker"
    folder.mkdir()
    (folder / "openenv.yaml").write_text(MANIFEST, encoding="utf-8")
    (folder / "marker_env.py").write_text(textwrap.dedent(ENVIRONMENT), encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def served(env_dir: Path) -> Iterator[tuple[subprocess.Popen[bytes], str, Path]]:
    """One `openenv serve` process for the module; the SIGINT test, last, stops it."""
    marker = env_dir.parent / "closed.txt"
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        free_port = sock.getsockname()[1]
    command = [sys.executable, "-m", "openenv_sdk.cli.main", "serve", str(env_dir)]
    command += ["--port", str(free_port), "--max-sessions", "3", "--log-level", "warning", "--no-auth"]
    process = subprocess.Popen(
        command,
        env={**os.environ, "OPENENV_TEST_MARKER": str(marker)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{free_port}"
    try:
        if not wait_until(lambda: _healthy(url) or process.poll() is not None, timeout_s=30, interval_s=0.05):
            raise AssertionError("openenv serve did not answer /health within 30 s")
        if process.poll() is not None:
            output = process.stdout.read().decode()  # type: ignore[union-attr]
            raise AssertionError(f"openenv serve exited {process.returncode}: {output}")
        yield process, url, marker
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(10)
        process.stdout.close()  # type: ignore[union-attr]


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/health", timeout=1).status_code == 200
    except httpx.TransportError:
        return False


def test_serves_on_the_given_port_with_max_sessions(served: tuple[subprocess.Popen[bytes], str, Path]) -> None:
    _, url, _ = served
    health = httpx.get(f"{url}/health").json()
    assert (health["status"], health["active_sessions"], health["max_sessions"]) == ("healthy", 0, 3)
    assert httpx.get(f"{url}/metadata").json()["name"] == "MarkerEnvironment"
    with connect(ws_url(url)) as ws:
        ask(ws, "reset", {})
        reply = ask(ws, "step", {"tool": "ping", "arguments": {}})
        assert reply["data"]["observation"]["result"]["data"] == "pong"


def test_sigint_exits_cleanly_and_closes_sessions(served: tuple[subprocess.Popen[bytes], str, Path]) -> None:
    process, url, marker = served
    assert wait_until(lambda: httpx.get(f"{url}/health").json()["active_sessions"] == 0)
    closed_before = _lines(marker)
    assert httpx.post(f"{url}/sessions").status_code == 201
    with connect(ws_url(url)) as ws:
        ask(ws, "reset", {})
        assert httpx.get(f"{url}/health").json()["active_sessions"] == 2
        started = time.monotonic()
        process.send_signal(signal.SIGINT)
        code = process.wait(10)
    elapsed = time.monotonic() - started
    output = process.stdout.read().decode()  # type: ignore[union-attr]
    assert code == 0, output
    assert elapsed < 5, f"took {elapsed:.1f} s to stop"
    assert _lines(marker) == closed_before + 2, "close() must run for each session open at shutdown"
    assert "Traceback" not in output, output


def _lines(marker: Path) -> int:
    return len(marker.read_text(encoding="utf-8").splitlines()) if marker.exists() else 0
