"""`openenv serve` requires an orchestrator token unless told `--no-auth`: a real server on a real port."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from openenv_sdk.client import GenericEnvClient
from openenv_sdk.types import NO_AUTH_VAR, ORCHESTRATOR_TOKEN_FILE_VAR, ORCHESTRATOR_TOKEN_VAR

ECHO_DIR = Path(__file__).resolve().parents[2] / "environments" / "echo"
STARTUP_TIMEOUT_S = 60.0


class _Served:
    def __init__(self, process: subprocess.Popen[str], url: str) -> None:
        self.process, self.url = process, url
        self.lines: list[str] = []
        self.done = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)
        self.done.set()

    @property
    def output(self) -> str:
        return "".join(self.lines)


@pytest.fixture
def serve() -> Iterator[Callable[..., _Served]]:
    started: list[_Served] = []

    def start(*args: str, env: dict[str, str] | None = None) -> _Served:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        environment = {k: v for k, v in os.environ.items() if k not in (ORCHESTRATOR_TOKEN_VAR, NO_AUTH_VAR)}
        environment.update({"COLUMNS": "300", "NO_COLOR": "1", **(env or {})})
        command = [sys.executable, "-m", "openenv_sdk.cli.main", "serve", str(ECHO_DIR), "--port", str(port), "--log-level", "warning", *args]
        process = subprocess.Popen(command, env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        served = _Served(process, f"http://127.0.0.1:{port}")
        started.append(served)
        return served

    yield start
    for served in started:
        if served.process.poll() is None:
            served.process.terminate()
        served.process.wait(10)
        served.done.wait(5)  # the reader reached the end of the output
        if served.process.stdout is not None:
            served.process.stdout.close()


def _healthy(served: _Served) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if served.process.poll() is not None:
            raise AssertionError(f"openenv serve exited {served.process.returncode}: {served.output}")
        try:
            if httpx.get(f"{served.url}/health", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"openenv serve did not answer /health within {STARTUP_TIMEOUT_S} s: {served.output}")


def test_serve_without_flags_makes_a_token_refuses_tokenless_requests_and_accepts_the_printed_token(serve: Callable[..., _Served]) -> None:
    served = serve()
    _healthy(served)
    match = re.search(r"Orchestrator token: (\S+)", served.output)
    assert match, served.output
    token = match.group(1)
    assert httpx.post(f"{served.url}/sessions").status_code in (401, 403)
    assert httpx.post(f"{served.url}/reset", json={}).status_code in (401, 403)
    assert httpx.post(f"{served.url}/sessions", headers={"Authorization": "Bearer wrong"}).status_code in (401, 403)
    assert httpx.post(f"{served.url}/sessions", headers={"Authorization": f"Bearer {token}"}).status_code == 201
    with GenericEnvClient(served.url, orchestrator_token=token) as client:
        client.reset()
        assert client.call_tool("echo", message="hi") is not None
    with pytest.raises(Exception, match="401|403|token|nauthori"), GenericEnvClient(served.url) as tokenless:
        tokenless.reset()
    assert "Warning" not in served.output


def test_serve_uses_the_token_it_is_given(serve: Callable[..., _Served], tmp_path: Path) -> None:
    (tmp_path / "token").write_text("given-token-123\n")
    served = serve("--orchestrator-token-file", str(tmp_path / "token"))
    _healthy(served)
    assert "Orchestrator token:" not in served.output  # nothing new to print
    assert httpx.post(f"{served.url}/sessions").status_code in (401, 403)
    assert httpx.post(f"{served.url}/sessions", headers={"Authorization": "Bearer given-token-123"}).status_code == 201


def test_serve_reads_the_token_file_a_variable_names(serve: Callable[..., _Served], tmp_path: Path) -> None:
    # how `openenv deploy`'s pods get theirs: the image's command is fixed, the Secret is a mounted file
    (tmp_path / "token").write_text("mounted-token-456\n")
    served = serve(env={ORCHESTRATOR_TOKEN_FILE_VAR: str(tmp_path / "token")})
    _healthy(served)
    assert "Orchestrator token:" not in served.output
    assert httpx.post(f"{served.url}/sessions").status_code in (401, 403)
    assert httpx.post(f"{served.url}/sessions", headers={"Authorization": "Bearer mounted-token-456"}).status_code == 201


@pytest.mark.parametrize("how", ["flag", "variable"])
def test_no_auth_serves_tokenless_with_a_warning(serve: Callable[..., _Served], how: str) -> None:
    served = serve("--no-auth") if how == "flag" else serve(env={NO_AUTH_VAR: "1"})
    _healthy(served)
    assert httpx.post(f"{served.url}/sessions").status_code == 201
    assert "Warning: no orchestrator token (--no-auth)" in served.output
    assert "Orchestrator token:" not in served.output


def test_no_auth_and_a_token_contradict(serve: Callable[..., _Served], tmp_path: Path) -> None:
    served = serve("--no-auth", env={ORCHESTRATOR_TOKEN_VAR: "abc"})
    assert served.process.wait(STARTUP_TIMEOUT_S) == 1
    served.done.wait(5)
    assert f"--no-auth and {ORCHESTRATOR_TOKEN_VAR} contradict each other" in served.output
