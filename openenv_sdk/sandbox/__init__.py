"""Sandboxes for agent commands: one per session, built on bubblewrap.

- `Sandbox`: a session's uid, private folder and namespaced commands (`run`, `popen`, `close`);
  `Sandbox.from_manifest(manifest)` is how environments make one (limits, user, isolation mode
  and the phase's egress, all from the manifest). One class per mode: `BubblewrapSandbox`,
  `UnisolatedSandbox` (the opt-out). Failures to make or use one are `SandboxError`s.
- `Egress` / `Endpoint`: what a command may reach (nothing by default): fixed endpoints relayed
  in, and host names through the allowlist proxy; `launch_egress` adds an agent launch's.
- `run_command`: one command under limits without namespaces (trusted helpers, the opt-out).
- `isolation_mode` / `isolation_report`: whether isolation can be had here; `IsolationUnavailable`
  says what is missing; `OPT_OUT_ENV` runs unisolated on purpose.
"""

from ..errors import IsolationUnavailable, SandboxError
from ._fs import chown_tree, remove_tree
from ._isolation import OPT_OUT_ENV, Isolation, isolation_mode, isolation_report
from ._limits import CommandResult, SandboxLimits
from ._network import EGRESS_PINS_ENV, Egress, Endpoint, current_launch_egress, launch_egress, relay_url
from ._run import kill_session, run_command
from ._sandbox import BubblewrapSandbox, Mount, Sandbox, UnisolatedSandbox, kill_uid

__all__ = [
    "EGRESS_PINS_ENV",
    "OPT_OUT_ENV",
    "BubblewrapSandbox",
    "CommandResult",
    "Egress",
    "Endpoint",
    "Isolation",
    "IsolationUnavailable",
    "Mount",
    "Sandbox",
    "SandboxError",
    "SandboxLimits",
    "UnisolatedSandbox",
    "chown_tree",
    "current_launch_egress",
    "isolation_mode",
    "isolation_report",
    "kill_session",
    "kill_uid",
    "launch_egress",
    "relay_url",
    "remove_tree",
    "run_command",
]
