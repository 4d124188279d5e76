"""Agent commands are bounded: whatever they do costs that command at most."""

from __future__ import annotations

import errno
import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from openenv_sdk.sandbox import SandboxLimits, run_command

REPO = Path(__file__).resolve().parents[1]


def _processes() -> str:
    return subprocess.run(["ps", "-eo", "cmd"], capture_output=True, text=True, check=True).stdout


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    if os.geteuid() == 0:  # commands run as the sandbox user, who must own the workspace
        shutil.chown(work, "nobody")
    return work


def test_output_status_and_stderr_are_reported(workdir: Path) -> None:
    result = run_command("echo out; echo err >&2; exit 3", cwd=workdir)
    assert (result.stdout, result.stderr, result.exit_code, result.timed_out) == ("out\n", "err\n", 3, False)
    assert result.render() == "out\n[stderr]\nerr\n[exit code 3]"


def test_endless_loop_is_killed_at_the_timeout(workdir: Path) -> None:
    started = time.monotonic()
    result = run_command("while true; do :; done", cwd=workdir, limits=SandboxLimits(timeout_s=0.5))
    assert result.timed_out and result.exit_code == 124
    assert time.monotonic() - started < 3
    assert "timed out after" in result.render()


def test_huge_output_is_truncated_with_a_marker_and_flooding_is_stopped(workdir: Path) -> None:
    limits = SandboxLimits(max_output_bytes=1000, kill_after_output_bytes=8 * 1024**2, timeout_s=20)
    result = run_command("yes | head -c 1000000000", cwd=workdir, limits=limits)
    assert result.stdout.startswith("y\n") and "bytes truncated ...]" in result.stdout
    assert len(result.stdout) < 1100
    assert "killed: output exceeded 8388608 bytes" in result.stderr
    small = run_command("head -c 5000 /dev/zero | tr '\\0' a", cwd=workdir, limits=SandboxLimits(max_output_bytes=1000))
    assert small.stdout_truncated_bytes == 4000
    assert small.stdout.endswith("[... 4000 bytes truncated ...]\n")


def test_fork_bomb_is_contained(workdir: Path) -> None:
    result = run_command(":(){ :|:& };:", cwd=workdir, limits=SandboxLimits(timeout_s=5, max_processes=32))
    assert result.duration_s < 10
    time.sleep(0.2)
    assert run_command("echo alive", cwd=workdir).stdout == "alive\n"  # the next command runs
    leftovers = _processes().count(":|:")
    assert leftovers == 0


def test_memory_limit_stops_a_hog(workdir: Path) -> None:
    limits = SandboxLimits(memory_bytes=256 * 1024**2)
    result = run_command("python3 -c 'x = bytearray(1024**3)'", cwd=workdir, limits=limits)
    assert result.exit_code != 0 and "MemoryError" in result.stderr


def test_background_children_are_killed_when_the_command_ends(workdir: Path) -> None:
    # a duration no other process has: `ps` lists the whole machine (containers' processes too)
    marker = f"sleep {300 + secrets.randbelow(10**6) / 10**6:.6f}"
    result = run_command(f"{marker} & echo started", cwd=workdir, limits=SandboxLimits(timeout_s=10))
    assert result.stdout == "started\n" and not result.timed_out
    time.sleep(0.1)
    assert marker not in _processes()


def test_deleted_working_directory_is_reported_not_raised(tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    result = run_command("pwd", cwd=gone)
    assert result.exit_code == 126 and "does not exist (was it deleted?)" in result.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="dropping to the sandbox user needs root")
def test_commands_run_as_the_sandbox_user_and_cannot_signal_the_server(workdir: Path) -> None:
    result = run_command(f"id -un; kill -0 {os.getpid()} 2>&1 || echo refused", cwd=workdir)
    assert result.stdout.splitlines()[0] == "nobody"
    assert result.stdout.rstrip().endswith("refused")


@pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox user only matters when the server is root")
def test_a_missing_sandbox_user_refuses_instead_of_running_as_root(workdir: Path) -> None:
    result = run_command("id -u", cwd=workdir, limits=SandboxLimits(sandbox_user="no-such-user-xyz"))
    assert result.exit_code == 126 and result.stdout == ""
    assert result.stderr == "sandbox user 'no-such-user-xyz' does not exist; refusing to run the command as root"


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make a folder only the sandbox user can enter")
def test_commands_start_in_a_workspace_only_the_sandbox_user_can_enter(tmp_path: Path) -> None:
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    shutil.chown(private, "nobody", "nogroup")
    assert run_command("pwd", cwd=private).stdout == f"{private}\n"


def test_a_mount_inside_a_writable_mount_is_reachable_by_the_session_user(tmp_path: Path) -> None:
    """The folders above a mount that lie inside another bind are made 0755, not bubblewrap's 0700."""
    from openenv_sdk.sandbox import Mount, Sandbox, isolation_mode

    isolation_mode()
    scratch, shared = tmp_path / "scratch", tmp_path / "shared"
    scratch.mkdir()
    shared.mkdir()
    (shared / "tool.txt").write_text("installed\n")
    os.chmod(tmp_path, 0o755)
    sandbox = Sandbox(limits=SandboxLimits(timeout_s=20), name="nested-mount")
    try:
        mounts = [
            Mount(source=scratch, target=Path("/scratch"), writable=True),
            Mount(source=shared, target=Path("/scratch/deep/cache/shared")),
        ]
        result = sandbox.run("cat /scratch/deep/cache/shared/tool.txt; stat -c %a /scratch/deep /scratch/deep/cache", mounts=mounts)
        assert result.exit_code == 0, result.render()
        assert result.stdout.split() == ["installed", "755", "755"]
        assert (scratch / "deep" / "cache").is_dir()  # made in the writable bind, where it belongs
    finally:
        sandbox.close()


# --- the seccomp filter and the session bounds ---------------------------------------------------


def test_every_denied_syscall_fails_with_eperm_in_the_sandbox() -> None:
    """Each syscall of the ptrace family, called with harmless arguments, fails with EPERM (the
    filter's answer) where the kernel would otherwise say ESRCH, EFAULT or EINVAL."""
    import pyseccomp  # type: ignore[import-untyped]

    from openenv_sdk.sandbox import Sandbox, isolation_mode
    from openenv_sdk.sandbox._seccomp import DENIED_SYSCALLS

    isolation_mode()
    numbers = {name: pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, name) for name in DENIED_SYSCALLS}
    code = (
        "import ctypes, json, sys\nlibc = ctypes.CDLL(None, use_errno=True)\nlibc.syscall.restype = ctypes.c_long\n"
        "out = {}\nfor name, nr in json.loads(sys.argv[1]).items():\n"
        "    ret = libc.syscall(nr, 0, 0, 0, 0, 0)\n    out[name] = ctypes.get_errno() if ret < 0 else 0\n"
        "print(json.dumps(out))"
    )
    with Sandbox(limits=SandboxLimits(timeout_s=20), name="seccomp") as sandbox:
        result = sandbox.run(["python3", "-c", code, json.dumps(numbers)])
        assert json.loads(result.stdout) == {name: errno.EPERM for name in DENIED_SYSCALLS}, result.render()
        status = sandbox.run("grep -E '^Seccomp:' /proc/self/status").stdout.split()
        assert status == ["Seccomp:", "2"]  # filter mode, inherited by every process of the command
    bare = run_command(["python3", "-c", code, json.dumps(numbers)], cwd="/tmp")
    assert json.loads(bare.stdout)["ptrace"] != errno.EPERM  # without the filter the kernel answers otherwise


@pytest.mark.skipif(os.geteuid() != 0, reason="session cgroups need root (CI runs as root)")
def test_a_separate_launcher_of_wrap_joins_the_cgroup_and_loads_the_filter() -> None:
    """`wrap()` without a descriptor (callers that start bubblewrap from a process of their own,
    such as the grading worker's spawner) gets the same filter and cgroup through its launcher."""
    from openenv_sdk.sandbox import Sandbox, isolation_mode

    isolation_mode()
    limits = SandboxLimits(timeout_s=20, session_memory_bytes=128 * 1024**2)
    with Sandbox(limits=limits, name="launcher") as sandbox:
        assert sandbox.cgroup is not None
        argv = sandbox.wrap(["/bin/sh", "-c", "grep -E '^Seccomp:' /proc/self/status"], cwd=sandbox.workspace)
        done = subprocess.run(argv, capture_output=True, text=True, timeout=20, env={"PATH": "/usr/bin:/bin"})
        assert done.stdout.split() == ["Seccomp:", "2"], done.stderr
        before = sandbox.cgroup.counters().oom_kills
        hog = sandbox.wrap(["python3", "-c", "b = b'x' * (400 * 1024**2)"], cwd=sandbox.workspace)
        killed = subprocess.run(hog, capture_output=True, timeout=20, env={"PATH": "/usr/bin:/bin"})
        assert killed.returncode != 0 and sandbox.cgroup.counters().oom_kills > before


def test_a_server_that_is_not_root_runs_sandboxes_without_the_bounds_and_says_so(tmp_path: Path) -> None:
    """Degrade, not refuse: as an unprivileged user the sandbox runs (filter included) without a
    cgroup or a tmpfs, and the report names each missing bound."""
    script = (
        "import json; from openenv_sdk.sandbox import Sandbox, isolation_report\n"
        "with Sandbox(name='unprivileged') as s:\n"
        "    r = s.run(\"grep -E '^Seccomp:' /proc/self/status\")\n"
        "    print(json.dumps([r.stdout.split(), s.cgroup is None, s.workspace_bounded, isolation_report()]))\n"
    )
    drop = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"] if os.geteuid() == 0 else []
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "TMPDIR": "/tmp"}
    done = subprocess.run(
        [*drop, sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=REPO, env=env
    )
    assert done.returncode == 0, done.stderr
    seccomp, no_cgroup, bounded, report = json.loads(done.stdout)
    assert (seccomp, no_cgroup, bounded) == (["Seccomp:", "2"], True, False)
    assert report["isolated"] is True
    for bound in ("session_memory", "session_processes", "workspace"):
        assert report[bound].startswith("missing: the server is not root"), report


def test_session_limits_reject_values_that_cannot_work() -> None:
    from pydantic import ValidationError

    for field, value in (("session_memory_bytes", 1024), ("session_max_processes", 1), ("workspace_bytes", 10), ("workspace_inodes", 5)):
        with pytest.raises(ValidationError, match=field):
            SandboxLimits.model_validate({field: value})


def test_a_cgroup_path_is_found_in_a_containers_view_of_the_hierarchy() -> None:
    from openenv_sdk.sandbox._cgroup import _on_disk

    # the host's view: the mount's root is the hierarchy's root
    assert _on_disk("/", "/sys/fs/cgroup/memory", "/user.slice/x") == Path("/sys/fs/cgroup/memory/user.slice/x")
    # a container without a cgroup namespace: its mount's root is its own cgroup
    assert _on_disk("/docker/abc", "/sys/fs/cgroup/memory", "/docker/abc") == Path("/sys/fs/cgroup/memory")
    assert _on_disk("/docker/abc", "/sys/fs/cgroup/memory", "/docker/abc/inner") == Path("/sys/fs/cgroup/memory/inner")
    # our cgroup outside what is mounted: the mount's top
    assert _on_disk("/docker/abc", "/sys/fs/cgroup", "/elsewhere") == Path("/sys/fs/cgroup")


@pytest.mark.skipif(os.geteuid() != 0, reason="session cgroups need root (CI runs as root)")
def test_a_command_is_in_its_sessions_cgroup_from_its_first_instruction_and_never_runs_outside() -> None:
    """A command joins the session's cgroup before bubblewrap runs it (v1: the child joins itself
    before exec; v2: bubblewrap waits on --block-fd until the server moved it); when the join fails
    (the cgroup was removed behind the session's back), the command is not run, never unbounded."""
    from openenv_sdk.sandbox import Sandbox, isolation_mode

    isolation_mode()
    with Sandbox(limits=SandboxLimits(timeout_s=20), name="admission") as sandbox:
        assert sandbox.cgroup is not None
        worker = sandbox.popen(["/bin/sh", "-c", "echo up; sleep 30"])
        assert worker.stdout is not None and worker.stdout.readline() == b"up\n"
        theirs = [e.name for e in os.scandir("/proc") if e.name.isdigit() and e.stat().st_uid == sandbox.uid]
        assert theirs
        for pid in theirs:  # seen from the host: every process of the command is in the session's cgroups
            lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
            for controller, version in sandbox.cgroup.support.versions.items():
                line = next(x for x in lines if (x.split(":")[1] == "" if version == 2 else controller in x.split(":")[1]))
                assert line.endswith(f"/openenv-sandbox/{sandbox.uid}"), lines
        sandbox.kill_all()
        deadline = time.monotonic() + 10
        for path in sandbox.cgroup.paths:  # removed behind the session's back, once empty
            while Path(path).exists():
                try:
                    Path(path).rmdir()
                except OSError:
                    assert time.monotonic() < deadline, f"{path} stayed busy"
                    time.sleep(0.05)
        refused = sandbox.run("touch ran-unbounded")
        assert refused.exit_code == 127 and "could not start" in refused.stderr, refused.render()
        assert not (sandbox.workspace / "ran-unbounded").exists()


# --- a sandbox from the manifest ------------------------------------------------------------------


def _manifest(**sections: object) -> object:
    from openenv_sdk.manifest import Manifest

    return Manifest.model_validate({"name": "probe", **sections})


def test_from_manifest_carries_the_limits_the_bounds_the_user_and_the_agents_egress(monkeypatch: pytest.MonkeyPatch) -> None:
    from openenv_sdk.sandbox import EGRESS_PINS_ENV, BubblewrapSandbox, Sandbox

    monkeypatch.setenv(EGRESS_PINS_ENV, json.dumps({"pypi.org": "10.0.0.5", "other.example": "10.0.0.6"}))
    manifest = _manifest(
        sandbox={"user": "no-such-user-here", "command_timeout_s": 7, "max_output_bytes": 4096, "memory": "512m",
                 "max_processes": 40, "session_memory": "256m", "session_max_processes": 64, "workspace_size": "64m",
                 "workspace_inodes": 2048},
        network={"policy": "allowlist", "allow": ["pypi.org:443"], "grading_allow": ["files.example:443"]},
    )  # fmt: skip
    with Sandbox.from_manifest(manifest, name="from-manifest") as sandbox:  # type: ignore[arg-type]
        assert type(sandbox) is BubblewrapSandbox and sandbox.namespaced
        assert sandbox.limits == SandboxLimits(
            timeout_s=7, max_output_bytes=4096, memory_bytes=512 * 1024**2, max_processes=40,
            session_memory_bytes=256 * 1024**2, session_max_processes=64, workspace_bytes=64 * 1024**2,
            workspace_inodes=2048, sandbox_user="nobody",  # the manifest's user does not exist here
        )  # fmt: skip
        assert sandbox.user == "no-such-user-here"
        assert sandbox.network.allow == ("pypi.org:443",) and dict(sandbox.network.pins) == {"pypi.org": "10.0.0.5"}
        if os.geteuid() == 0 and sandbox.cgroup is not None:
            assert sandbox.cgroup.memory_bytes == 256 * 1024**2 and sandbox.cgroup.max_processes == 64
    with Sandbox.from_manifest(manifest, phase="grading", name="from-manifest") as grading:  # type: ignore[arg-type]
        assert grading.network.allow == ("files.example:443",) and not grading.network.pins
    with Sandbox.from_manifest(manifest.sandbox, name="section-only") as bare:  # type: ignore[attr-defined]
        assert bare.network.empty and bare.limits.timeout_s == 7


def test_the_default_grading_phase_reaches_nothing() -> None:
    from openenv_sdk.sandbox import Sandbox

    manifest = _manifest(network={"policy": "allowlist", "allow": ["pypi.org"]})
    with Sandbox.from_manifest(manifest, phase="grading", name="grading") as grading:  # type: ignore[arg-type]
        assert grading.network.empty
        assert grading.run("env | grep -ci proxy; true").stdout.strip() == "0"


def test_the_opt_out_is_its_own_class_behind_the_same_contract(workdir: Path) -> None:
    from openenv_sdk.sandbox import Isolation, Sandbox, UnisolatedSandbox

    with Sandbox.from_manifest(_manifest(), isolation=Isolation.NONE, name="opt-out") as sandbox:  # type: ignore[arg-type]
        assert type(sandbox) is UnisolatedSandbox and sandbox.isolation is Isolation.NONE and not sandbox.namespaced
        ps = sandbox.run("ps -eo pid | wc -l").stdout.strip()
        assert int(ps) > 3  # no pid namespace: the host's processes are in sight
        if os.geteuid() == 0:
            assert sandbox.user == "nobody" and sandbox.run("id -un").stdout.strip() == "nobody"
            assert sandbox.python() == (shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin") or sys.executable)
    with pytest.raises(ValueError, match="^UnisolatedSandbox runs none, not bubblewrap$"):
        UnisolatedSandbox(isolation=Isolation.BWRAP)


def test_an_opt_out_user_that_is_root_or_missing_is_a_sandbox_error() -> None:
    from openenv_sdk.sandbox import Isolation, Sandbox, SandboxError

    if os.geteuid() != 0:
        pytest.skip("the opt-out picks a user only when the server is root")  # CI runs as root
    for user, why in (("root", "which must not be root"), ("no-such-user-here", "which does not exist here")):
        with pytest.raises(SandboxError, match=f"^the opt-out runs commands as '{user}', {why}$"):
            Sandbox(limits=SandboxLimits(sandbox_user=user), isolation=Isolation.NONE, name="bad-user")


def test_the_opt_outs_grading_worker_drops_every_privilege(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under the opt-out as root, the grading worker runs through the sandbox's own command line:
    the opt-out user, no capabilities (bounding set empty), no_new_privs."""
    from openenv_sdk.grading.pytest_run import run_hidden_tests
    from openenv_sdk.sandbox import OPT_OUT_ENV, Sandbox

    if os.geteuid() != 0:
        pytest.skip("the opt-out drops privileges only when the server is root")  # CI runs as root
    monkeypatch.setenv(OPT_OUT_ENV, "1")  # the operator's opt-out: the grading worker's sandbox too
    solution = (
        "import os\n"
        "def who():\n"
        "    status = open('/proc/self/status').read().splitlines()\n"
        "    return [os.getuid(), [line for line in status if line.startswith(('CapBnd', 'NoNewPrivs', 'CapEff'))]]\n"
    )
    test = (
        "from solution import who\n"
        "def test_who():\n"
        "    uid, lines = who()\n"
        "    assert uid == 65534 and 'NoNewPrivs:\\t1' in lines, (uid, lines)\n"
        "    assert 'CapBnd:\\t0000000000000000' in lines and 'CapEff:\\t0000000000000000' in lines, lines\n"
    )
    with Sandbox.from_manifest(_manifest(), name="opt-out-grading") as sandbox:  # type: ignore[arg-type]
        (sandbox.workspace / "solution.py").write_text(solution)
        sandbox.give(sandbox.workspace / "solution.py")
        run = run_hidden_tests(sandbox, {"test_who.py": test}, ["solution.py"], timeout_s=120)
    assert run.outcomes == {"test_who.py::test_who": "passed"}, (run.messages, run.output_tail)
