"""Whether sessions can be isolated here, and the explicit opt-out.

Isolation is bubblewrap (`bwrap`, packaged by Debian): each command runs in its own user,
pid, mount, network, IPC and UTS namespaces, under a seccomp filter that denies ptrace. It is
probed once per process by running a real sandboxed `true`, filter included. Where it cannot be
had, sandboxed environments refuse to start with an error that says what is missing, unless the
operator opts out with `OPENENV_UNSAFE_NO_ISOLATION=1` (or `openenv serve --no-isolation`): then
commands run unisolated, and `/health` and `openenv validate` say so.

The session-wide resource bounds (a cgroup per session for memory and processes, a bounded tmpfs
as its folder) degrade instead: where the kernel does not give them (a container without a
writable cgroupfs, a server that is not root), sessions run with the per-command limits only, and
the report names each missing bound. They protect the host and the other sessions' latency, not a
grade's integrity: refusing to serve would leave the operator nothing better.
"""

from __future__ import annotations

import enum
import functools
import os
import shutil
import subprocess

from ..errors import IsolationUnavailable

__all__ = ["OPT_OUT_ENV", "Isolation", "IsolationUnavailable", "isolation_mode", "isolation_report"]

OPT_OUT_ENV = "OPENENV_UNSAFE_NO_ISOLATION"
"""Set to 1 to run sandboxed environments without isolation (development only)."""

CONTAINER_HINT = (
    "inside a container, run the server as root with `--cap-add` SYS_ADMIN, NET_ADMIN, SETUID, SETGID, "
    "SETPCAP, CHOWN and KILL (plus `--security-opt apparmor=unconfined` where AppArmor confines "
    "containers); DockerProvider asks for exactly these when the manifest has a `sandbox:` block"
)


class Isolation(str, enum.Enum):
    """How agent commands are isolated."""

    BWRAP = "bubblewrap"
    """Own uid (as root), user/pid/mount/net/ipc/uts namespaces per command."""
    NONE = "none"
    """Opted out: the server's namespaces; an unprivileged user when root. Not a sandbox."""


def opted_out() -> bool:
    return os.environ.get(OPT_OUT_ENV, "").strip().lower() in ("1", "true", "yes")


@functools.cache
def probe() -> str | None:
    """None when a bubblewrap sandbox starts here; else why not."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "bubblewrap is not installed (Debian/Ubuntu: apt-get install bubblewrap)"
    from ._sandbox import probe_argv  # the same arguments a session uses
    from ._seccomp import SeccompUnavailable

    try:
        argv = probe_argv()
    except SeccompUnavailable as e:
        return str(e)
    try:
        run = subprocess.run(argv, capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError) as e:
        return f"bubblewrap could not be started: {e}"
    if run.returncode != 0:
        why = run.stderr.decode(errors="replace").strip()[-300:]
        return f"bubblewrap failed here ({why}); {CONTAINER_HINT}"
    return None


def isolation_mode() -> Isolation:
    """The isolation sessions get here.

    Raises:
        IsolationUnavailable: bubblewrap cannot run and the operator did not opt out.
    """
    if opted_out():
        return Isolation.NONE
    why = probe()
    if why is not None:
        raise IsolationUnavailable(
            f"agent commands cannot be isolated: {why}. To run without isolation anyway (development "
            f"only: sessions then share a user and see each other), set {OPT_OUT_ENV}=1 or pass "
            f"`openenv serve --no-isolation`."
        )
    return Isolation.BWRAP


def bounds_report() -> dict[str, str]:
    """Each session-wide bound, and how it is had here or why it is missing (`missing: ...`)."""
    from ._cgroup import cgroup_support
    from ._workspace import tmpfs_support

    cgroups = cgroup_support()
    tmpfs = tmpfs_support()
    return {
        "session_memory": cgroups.describe("memory"),
        "session_processes": cgroups.describe("pids"),
        "workspace": "tmpfs of bounded size and inodes per session" if tmpfs is None else f"missing: {tmpfs}",
    }


def isolation_report() -> dict[str, str | bool]:
    """For `/health` and `openenv validate`: the mode, why when it is not isolated, and the
    session-wide bounds (`session_memory`, `session_processes`, `workspace`: each says how, or
    `missing: <why>`)."""
    if opted_out():
        return {"isolated": False, "mode": Isolation.NONE.value, "detail": f"opted out ({OPT_OUT_ENV}=1)"}
    why = probe()
    if why is not None:
        return {"isolated": False, "mode": "unavailable", "detail": why}
    return {
        "isolated": True,
        "mode": Isolation.BWRAP.value,
        "detail": "uid, pid, mount, network namespaces per command; seccomp denies ptrace",
        **bounds_report(),
    }
