"""scripts/setup_container_engine.sh: a re-run on a prepared machine is quick and prints the export line."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from .conftest import REPO, requires_engine

pytestmark = requires_engine


def test_rerun_is_quick_and_prints_the_export_line() -> None:
    # CI runs as root (the script installs packages); it refuses to run otherwise.
    started = time.monotonic()
    result = subprocess.run(
        ["bash", str(REPO / "scripts" / "setup_container_engine.sh")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    elapsed_s = time.monotonic() - started
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "export DOCKER_HOST=unix:///run/podman/podman.sock"
    assert "[setup-engine" in result.stderr
    assert elapsed_s < 15, result.stderr


def _service_pids() -> list[int]:
    found = subprocess.run(
        ["pgrep", "-f", "podman system service"], capture_output=True, text=True, check=False
    )
    return [int(pid) for pid in found.stdout.split()]


def test_a_first_start_inside_command_substitution_returns() -> None:
    # enable_container_engine.sh runs `eval "$(setup_container_engine.sh | grep '^export ')"`: `$(...)` waits for
    # every process holding its pipe, so a service left attached to the script's stdout (or a
    # script that waits on it) hangs CI until its time limit. Seen once: 90 minutes, no output.
    subprocess.run(["pkill", "-f", "podman system service"], check=False)
    deadline = time.monotonic() + 10
    while _service_pids() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _service_pids(), "the running podman service did not stop"
    script = REPO / "scripts" / "setup_container_engine.sh"
    result = subprocess.run(
        ["bash", "-c", f"out=\"$(bash {script} | grep '^export ')\"; echo \"$out\""],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "export DOCKER_HOST=unix:///run/podman/podman.sock"
    assert "starting podman system service" in result.stderr
    pids = _service_pids()
    assert len(pids) == 1, pids
    # started from /, so a removed checkout never becomes the working directory of its conmons
    assert (Path("/proc") / str(pids[0]) / "cwd").resolve() == Path("/")
    ping = subprocess.run(
        ["curl", "-sf", "--max-time", "5", "--unix-socket", "/run/podman/podman.sock", "http://d/_ping"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert ping.stdout == "OK"
