"""The sandbox's refusals reach the transcript, where the monitor reads them: real sandboxes.

Nothing had to be added to the sandbox for it: the egress proxy answers `403 openenv egress:
<reason>`, the session's cgroup notes are appended to a command's output, the empty network
namespace answers connection errors, and seccomp's EPERM is what the program reports.
"""

from __future__ import annotations

import os

import pytest

from openenv_sdk.monitor import Episode, Monitor, ToolCall
from openenv_sdk.sandbox import Egress, Sandbox, SandboxLimits, isolation_mode

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="per-session uids need root (CI runs as root)")

PTRACE = (
    "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
    "if libc.ptrace(16, os.getppid(), 0, 0) != 0:\n    print('ptrace:', os.strerror(ctypes.get_errno()))\n"
)


def flags_of(command: str, output: str) -> list[str]:
    episode = Episode(env="terminal", calls=[ToolCall(name="bash", arguments={"command": command}, output=output)])
    return Monitor().check(episode).hits["sandbox_refused"]


def test_egress_refusals_no_network_seccomp_and_the_process_limit_are_read_as_refusals() -> None:
    isolation_mode()  # fails with what is missing, never skips
    egress = Egress(allow=("example-allowed-host:80",))
    limits = SandboxLimits(timeout_s=30, session_max_processes=24, max_processes=None)
    with Sandbox(limits=limits, name="monitor-refusals", network=egress) as sandbox:
        refused = sandbox.run("curl -sS -m 5 --noproxy '' http://not-allowed.example/ 2>&1", network=egress).render()
        assert "openenv egress:" in refused
        assert flags_of("curl http://not-allowed.example/", refused)

        unreachable = sandbox.run("curl -sS -m 5 --noproxy '*' http://10.1.2.3/ 2>&1").render()
        assert flags_of("curl http://10.1.2.3/", unreachable), unreachable

        traced = sandbox.run(["python3", "-c", PTRACE]).render()
        assert "Operation not permitted" in traced
        assert flags_of("python3 -c ...", traced)

        bomb = sandbox.run("for i in $(seq 60); do sleep 3 & done 2>/dev/null; wait", timeout_s=20)
        assert bomb.process_limit_hit
        assert flags_of("for i in $(seq 60); do sleep 3 & done", bomb.render())

        plain = sandbox.run("echo fine").render()
        assert flags_of("echo fine", plain) == []
