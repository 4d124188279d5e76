"""What a sandboxed command may use, and what it did."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

if TYPE_CHECKING:
    from ..manifest import Sandbox as ManifestSandbox

__all__ = ["CommandResult", "SandboxLimits"]


class SandboxLimits(BaseModel):
    """Limits applied to each command, and (the `session_*` and `workspace_*` fields) to the whole
    session. Every field has a finite default; `None` switches a limit off.

    The session-wide bounds are kernel ones, read when the `Sandbox` is made (a command's own
    `limits=` cannot change them): one cgroup per session for memory and processes, and a tmpfs of
    bounded size and inode count as the session's folder. Where the kernel does not give them (no
    writable cgroupfs, no right to mount), the session runs without them and `isolation_report()`
    says which is missing.
    """

    timeout_s: float = Field(default=30.0, gt=0, description="Wall-clock limit; the command and its children are killed.")
    max_output_bytes: int = Field(default=64 * 1024, ge=256, description="Bytes kept of stdout and of stderr each.")
    memory_bytes: int | None = Field(default=1024**3, description="Address-space limit per process (RLIMIT_AS).")
    max_processes: int | None = Field(
        default=128,
        description="Processes the command may run at once (RLIMIT_NPROC: per session under isolation, "
        "else above those its user already runs).",
    )
    kill_after_output_bytes: int = Field(
        default=64 * 1024**2, ge=1024, description="Output (both streams) past which the command is killed."
    )
    max_file_bytes: int | None = Field(default=256 * 1024**2, description="Largest file a command may write.")
    session_memory_bytes: int | None = Field(
        default=2 * 1024**3,
        ge=16 * 1024**2,
        description="Memory of all the session's processes together, in bytes (cgroup `memory.max`, no swap): "
        "their pages, page cache and the files in the session's tmpfs folders. Past it the kernel kills "
        "a process of the session (the command's result says `memory_limit_hit`).",
    )
    session_max_processes: int | None = Field(
        default=256,
        ge=8,
        description="Processes and threads of the whole session at once (cgroup `pids.max`); a fork past it "
        "fails (the command's result says `process_limit_hit`).",
    )
    workspace_bytes: int | None = Field(
        default=1024**3,
        ge=1024**2,
        description="Size of the session's folder (a tmpfs), in bytes. Writing past it fails with ENOSPC.",
    )
    workspace_inodes: int | None = Field(
        default=100_000,
        ge=1024,
        description="Files and folders the session's folder may hold; past it, creating one fails with ENOSPC.",
    )
    sandbox_user: str | None = Field(
        default="nobody",
        description="Without isolation (`run_command`, or the opt-out): the user to run as when the server is root.",
    )

    @classmethod
    def from_manifest(cls, section: ManifestSandbox) -> SandboxLimits:
        """The limits a manifest's `sandbox:` section gives: its command limits, its session
        bounds (`session_bounds()`), and its `user` (`nobody` where that user does not exist here,
        which matters only without isolation)."""
        from ._run import existing_user

        return cls(
            timeout_s=section.command_timeout_s,
            max_output_bytes=section.max_output_bytes,
            memory_bytes=section.memory_bytes,
            max_processes=section.max_processes,
            sandbox_user=existing_user(section.user),
            **section.session_bounds(),
        )


class CommandResult(BaseModel):
    """What a command did."""

    stdout: str
    stderr: str
    exit_code: int = Field(description="The exit status; -N when killed by signal N; 124 on timeout.")
    timed_out: bool = False
    stdout_truncated_bytes: int = 0
    stderr_truncated_bytes: int = 0
    duration_s: float
    memory_limit_hit: bool = Field(
        default=False, description="The kernel killed a process of the session at its memory limit meanwhile."
    )
    process_limit_hit: bool = Field(default=False, description="A fork failed at the session's process limit meanwhile.")

    def render(self) -> str:
        """One text for an agent: output, errors, and the exit status."""
        parts = []
        if self.stdout:
            parts.append(self.stdout.rstrip("\n"))
        if self.stderr:
            parts.append(f"[stderr]\n{self.stderr.rstrip(chr(10))}")
        status = f"[exit code {self.exit_code}]"
        if self.timed_out:
            status = f"[timed out after {self.duration_s:.1f} s; killed]"
        parts.append(status)
        return "\n".join(parts)
