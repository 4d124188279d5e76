"""`openenv serve` stops at SIGTERM within a second, with nothing of its sessions left: a
command in flight is killed, every workspace removed (each session's `close()` runs, all at
once)."""

from __future__ import annotations

import json
import signal
import sys
import textwrap
import time
from pathlib import Path

import httpx
import pytest
from fixtures.servers import ask, ws_url
from websockets.sync.client import connect

from .served import serve_folder

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="sandboxes and signals")

MANIFEST = """\
spec_version: 1
name: workspaces
version: 0.0.1
type: space
runtime: fastapi
port: 8000
environment: workspace_env:WorkspaceEnvironment
"""

ENVIRONMENT = '''\
"""One sandbox (a workspace folder) per session; `shell` runs a command in it."""

import os

from openenv_sdk import Environment, tool
from openenv_sdk.sandbox import Sandbox


class WorkspaceEnvironment(Environment):
    """A sandbox per episode."""

    def reset(self, seed=None, episode_id=None, **task):
        self._sandbox = Sandbox(name="drain", base_dir=os.environ["DRAIN_BASE"])
        return super().reset(seed=seed, episode_id=episode_id)

    @tool
    def shell(self, command: str) -> str:
        """Run a command in the workspace."""
        result = self._sandbox.run(["/bin/sh", "-c", command], timeout_s=30)
        return f"exit {result.exit_code}"

    def close(self) -> None:
        sandbox = getattr(self, "_sandbox", None)
        if sandbox is not None:
            sandbox.close()
'''


def test_sigterm_drains_in_under_a_second_with_nothing_left(tmp_path: Path) -> None:
    """SIGTERM to `openenv serve` with 5 sandboxed sessions, one running `sleep 12`: exits in under
    1 s, the command killed, no workspace left (was 6.1 s, 1 of 5 workspaces left)."""
    env_dir = tmp_path / "workspaces"
    env_dir.mkdir()
    (env_dir / "openenv.yaml").write_text(MANIFEST, encoding="utf-8")
    (env_dir / "workspace_env.py").write_text(textwrap.dedent(ENVIRONMENT), encoding="utf-8")
    base = tmp_path / "sandboxes"
    base.mkdir()
    with serve_folder(env_dir, env={"DRAIN_BASE": str(base)}) as (process, url):
        sockets = [connect(ws_url(url), open_timeout=10) for _ in range(5)]
        try:
            for ws in sockets:
                assert ask(ws, "reset", {}, timeout_s=30)["type"] == "observation"
            assert len(list(base.iterdir())) == 5, list(base.iterdir())
            assert ask(sockets[1], "step", {"tool": "shell", "arguments": {"command": "true"}})["type"] == "observation"
            sockets[0].send(json.dumps({"type": "step", "data": {"tool": "shell", "arguments": {"command": "sleep 12"}}}))
            time.sleep(0.5)  # the command runs
            assert httpx.get(f"{url}/health").json()["active_sessions"] == 5
            started = time.monotonic()
            process.send_signal(signal.SIGTERM)
            code = process.wait(15)
            took_s = time.monotonic() - started
        finally:
            for ws in sockets:
                ws.close()
        output = process.stdout.read().decode()  # type: ignore[union-attr]
    assert code in (0, -signal.SIGTERM), output  # uvicorn re-raises the signal it stopped for
    assert took_s < 1.0, f"took {took_s:.1f} s to stop\n{output}"
    assert list(base.iterdir()) == [], f"workspaces left behind: {list(base.iterdir())}"
    assert "Traceback" not in output, output
