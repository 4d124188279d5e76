"""scripts/setup_container_engine.sh: a re-run on a prepared machine is quick and prints the export line."""

from __future__ import annotations

import subprocess
import time

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
