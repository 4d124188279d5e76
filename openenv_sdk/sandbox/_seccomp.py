"""The seccomp filter every sandboxed command runs under: no ptrace, nor its relatives.

Without Yama (many kernels), a process may ptrace any other process of its uid. Inside one
sandbox that includes trusted code the session shares a uid and pid namespace with (a check's
shell that runs the agent's program, a git that runs the agent's filter): the agent's code could
attach to it and rewrite what it prints or how it exits. The filter makes every call that reads
or writes another process's memory or state fail with EPERM:

- `ptrace` (attach, seize, peek and poke), `process_vm_readv` and `process_vm_writev`;
- `pidfd_getfd` (takes a file descriptor out of another process), `kcmp` (compares two
  processes' kernel objects), `process_madvise` (acts on another process's memory) and
  `perf_event_open` (can sample another process).

The program is compiled by libseccomp (through `pyseccomp`, its ctypes binding) for the native
ABI and the other ABIs the CPU can enter: on x86_64 the 32-bit `int 0x80` ABI and x32 (the same
numbers with bit 30 set, which a filter written for x86_64 alone would let through); on aarch64
32-bit ARM. A syscall from any other ABI kills the process. bubblewrap loads the program (`--seccomp
FD`) after it set `no_new_privs`, just before it runs the command, so every process of the command
inherits it and none can remove it.

What it does not stop: `open("/proc/<pid>/mem")` of a same-uid process (the kernel checks the
same ptrace access there, and seccomp cannot see paths). Across sandboxes, pid namespaces make
every other process invisible and sessions have distinct uids; inside one sandbox, trusted code
must not share the agent's uid (see docs/security.md).
"""

from __future__ import annotations

import atexit
import errno
import functools
import os
import platform
import shutil
import tempfile
from types import ModuleType

from ..errors import IsolationUnavailable

__all__ = ["DENIED_SYSCALLS", "SeccompUnavailable", "filter_program", "program_fd", "program_path"]

DENIED_SYSCALLS = (
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "pidfd_getfd",
    "kcmp",
    "process_madvise",
    "perf_event_open",
)


class SeccompUnavailable(IsolationUnavailable):
    """The filter cannot be compiled here (libseccomp or its binding is missing)."""


def _compat_arches(seccomp: ModuleType) -> list[int]:
    """The ABIs besides the native one that a process on this CPU can make syscalls through."""
    arch = seccomp.Arch
    machine = platform.machine()
    if machine in ("x86_64", "amd64"):
        return [arch.X86, arch.X32]
    if machine in ("aarch64", "arm64"):
        return [arch.ARM]
    return []


@functools.cache
def filter_program() -> bytes:
    """The compiled BPF program (cached for the process).

    Raises:
        SeccompUnavailable: libseccomp (Debian: libseccomp2) or pyseccomp is not installed.
    """
    try:
        import pyseccomp as seccomp  # type: ignore[import-untyped]
    except (ImportError, OSError, RuntimeError) as e:  # the binding raises when libseccomp.so is missing
        raise SeccompUnavailable(
            f"the ptrace filter cannot be built: {e} (needs libseccomp: Debian/Ubuntu `apt-get install "
            "libseccomp2`, and the `pyseccomp` package)"
        ) from e
    rules = seccomp.SyscallFilter(seccomp.ALLOW)
    for arch in _compat_arches(seccomp):
        rules.add_arch(arch)
    for name in DENIED_SYSCALLS:
        rules.add_rule(seccomp.ERRNO(errno.EPERM), name)
    with tempfile.TemporaryFile() as out:
        rules.export_bpf(out)
        out.seek(0)
        return out.read()


def program_fd() -> int:
    """A pipe's read end holding the program, for `bwrap --seccomp FD` (pass it to the child,
    then close it). A fresh one per command: bubblewrap reads it to the end."""
    program = filter_program()
    read_end, write_end = os.pipe()
    try:
        # the program is a few hundred bytes, far below a pipe's buffer: the write cannot block
        os.write(write_end, program)
    finally:
        os.close(write_end)
    return read_end


@functools.cache
def program_path() -> str:
    """A file holding the program (made once per process, removed at exit), for launchers that
    open it themselves (`Sandbox.wrap` without a descriptor). The program is no secret: it is
    readable by all, writable by its owner only, in a folder only its owner can write to."""
    program = filter_program()
    folder = tempfile.mkdtemp(prefix="openenv-seccomp-")
    os.chmod(folder, 0o755)
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    path = os.path.join(folder, "filter.bpf")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, program)
    finally:
        os.close(fd)
    return path
