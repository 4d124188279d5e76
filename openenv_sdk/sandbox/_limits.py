"""What a sandboxed command may use, and what it did."""

from __future__ import annotations

from pydantic import BaseModel, Field

__all__ = ["CommandResult", "SandboxLimits"]


class SandboxLimits(BaseModel):
    """Limits applied to each command. Every field has a finite default."""

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
    sandbox_user: str | None = Field(
        default="nobody",
        description="Without isolation (`run_command`, or the opt-out): the user to run as when the server is root.",
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
