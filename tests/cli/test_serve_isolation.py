"""A sandboxed environment's server refuses to start where its sessions cannot be isolated, unless
opted out (`--no-isolation`, `OPENENV_UNSAFE_NO_ISOLATION=1`); `/health` says which, and
`openenv validate` reports it (`http.isolation`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from openenv_sdk.checks import RuntimeProbe, check_isolation, free_port
from openenv_sdk.server import create_app
from openenv_sdk.testing import serve_app

ROOT = Path(__file__).resolve().parents[2]
MESSAGE = "agent commands cannot be isolated: bubblewrap is not installed"


@pytest.fixture
def sandboxed_env(tmp_path: Path) -> Path:
    """The echo environment with a `sandbox:` block."""
    folder = tmp_path / "sandboxed"
    shutil.copytree(ROOT / "environments" / "echo", folder)
    with open(folder / "openenv.yaml", "a", encoding="utf-8") as f:
        f.write("sandbox:\n  user: agent\n")
    return folder


@pytest.fixture
def path_without_bwrap(tmp_path: Path) -> str:
    """A PATH with the tools a server needs but no `bwrap`: isolation is impossible there."""
    folder = tmp_path / "bin"
    folder.mkdir()
    for tool in ("sh", "bash", "python3"):
        found = shutil.which(tool)
        if found:
            (folder / tool).symlink_to(found)
    return str(folder)


def _serve(folder: Path, path: str, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PATH": path, "COLUMNS": "400", "NO_COLOR": "1"}
    env.pop("OPENENV_UNSAFE_NO_ISOLATION", None)
    command = [sys.executable, "-m", "openenv_sdk.cli.main", "serve", str(folder), "--log-level", "warning", *args]
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_serve_refuses_a_sandboxed_environment_without_isolation(sandboxed_env: Path, path_without_bwrap: str) -> None:
    server = _serve(sandboxed_env, path_without_bwrap, "--port", str(free_port()))
    output, _ = server.communicate(timeout=60)
    assert server.returncode == 1
    assert MESSAGE in output
    assert "--no-isolation" in output


def test_serve_with_no_isolation_starts_and_health_says_not_isolated(
    sandboxed_env: Path, path_without_bwrap: str
) -> None:
    port = free_port()
    server = _serve(sandboxed_env, path_without_bwrap, "--port", str(port), "--no-isolation")
    try:
        deadline = time.monotonic() + 60
        body = None
        while time.monotonic() < deadline and server.poll() is None:
            try:
                body = httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).json()
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        assert body is not None, server.stdout.read() if server.poll() is not None and server.stdout else "no answer"
        assert body["isolation"] == {
            "isolated": False,
            "mode": "none",
            "detail": "opted out (OPENENV_UNSAFE_NO_ISOLATION=1)",
        }
    finally:
        server.terminate()
        output, _ = server.communicate(timeout=30)
    assert "agent commands are NOT isolated" in output


def _echo_app(isolation: dict[str, str | bool] | None) -> object:
    from openenv_sdk.loader import load_environment

    app = create_app(load_environment(ROOT / "environments" / "echo").env_cls)  # type: ignore[arg-type]
    if isolation is not None:
        app.state.openenv_isolation = isolation
    return app


@pytest.mark.parametrize(
    ("isolation", "status", "words"),
    [
        ({"isolated": True, "mode": "bubblewrap", "detail": "namespaces"}, "pass", "sessions isolated (bubblewrap"),
        ({"isolated": False, "mode": "none", "detail": "opted out"}, "warn", "sessions are NOT isolated (opted out)"),
        ({"isolated": False, "mode": "unavailable", "detail": "no bwrap"}, "fail", "sessions are NOT isolated (no bwrap)"),
        (None, "pass", "no sandbox reported"),
    ],
)
def test_check_isolation_reads_health(isolation: dict[str, str | bool] | None, status: str, words: str) -> None:
    with serve_app(_echo_app(isolation)) as url, RuntimeProbe(url) as probe:
        result = check_isolation(probe)
    assert result.status == status
    assert result.message.startswith(words)


def test_health_has_no_isolation_for_an_environment_without_sandbox() -> None:
    with serve_app(_echo_app(None)) as url:
        assert httpx.get(f"{url}/health").json()["isolation"] is None
