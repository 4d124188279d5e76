"""`openenv validate` warns of each session-wide bound an isolated server's `/health` says is missing."""

from __future__ import annotations

from pathlib import Path

import pytest

from openenv_sdk.checks import RuntimeProbe, check_session_bounds, run_runtime_checks
from openenv_sdk.loader import load_environment
from openenv_sdk.server import create_app
from openenv_sdk.testing import serve_app

ROOT = Path(__file__).resolve().parents[2]
HELD = {
    "isolated": True, "mode": "bubblewrap", "detail": "namespaces",
    "session_memory": "cgroup v1 memory", "session_processes": "cgroup v1 pids",
    "workspace": "tmpfs of bounded size and inodes per session",
}  # fmt: skip


def _echo_app(isolation: dict[str, str | bool] | None) -> object:
    app = create_app(load_environment(ROOT / "environments" / "echo").env_cls)  # type: ignore[arg-type]
    if isolation is not None:
        app.state.openenv_isolation = isolation
    return app


def test_every_bound_held_passes_and_names_them() -> None:
    with serve_app(_echo_app(HELD)) as url, RuntimeProbe(url) as probe:
        result = check_session_bounds(probe)
    assert result.status == "pass"
    assert result.message == (
        "session bounds held: session_memory: cgroup v1 memory; session_processes: cgroup v1 pids; "
        "workspace: tmpfs of bounded size and inodes per session"
    )


def test_each_missing_bound_is_a_warning_naming_it_and_why() -> None:
    report = {**HELD, "session_memory": "missing: no writable memory cgroup", "workspace": "missing: cannot mount tmpfs"}
    with serve_app(_echo_app(report)) as url, RuntimeProbe(url) as probe:
        result = check_session_bounds(probe)
        names = [r.name for r in run_runtime_checks(probe)]
    assert result.status == "warn" and not result.fatal
    assert result.message == (
        "no bound on the session's memory (sandbox.session_memory): no writable memory cgroup; "
        "no bound on the session's folder size and files (sandbox.workspace_size, workspace_inodes): cannot mount tmpfs"
    )
    assert result.fix is not None and "root" in result.fix
    assert "http.session_bounds" in names


@pytest.mark.parametrize(
    "isolation",
    [None, {"isolated": False, "mode": "none", "detail": "opted out"}],
)
def test_a_server_without_isolated_sessions_is_left_to_the_isolation_rule(isolation: dict[str, str | bool] | None) -> None:
    with serve_app(_echo_app(isolation)) as url, RuntimeProbe(url) as probe:
        assert check_session_bounds(probe).status == "pass"
        assert "http.session_bounds" not in [r.name for r in run_runtime_checks(probe)]
