"""Grading an untrusted solution from a trusted process: proxies of the solution's modules whose
calls run in a worker process (`remote`), and a pytest plugin that installs them (`pytest_remote`).

For checks that must run the agent's programs or read its repository (imported as submodules):
`program_runs` (`ProgramRunServer`: each program a check runs, in a sandbox command of its own,
with the stdlib client `run_program.py`), `trusted_git` (git that reads none of the repository's
config, hooks, attributes or filters), `pytest_sandboxed` (a verifier's pytest whose imports of
the agent's modules and whose processes go through them) and `shell_lint` (lines of a shell
check that run the agent's code themselves).
"""

from openenv_sdk.grading._channel import Spawn, prefixed_spawn, spawn_subprocess
from openenv_sdk.grading._codec import CodecError, Limits
from openenv_sdk.grading._errors import (
    ChannelError,
    NotSendable,
    ProtocolError,
    RemoteError,
    RemoteTimeout,
    SolutionImportError,
    StaleHandle,
    WorkerDied,
)
from openenv_sdk.grading._proxy import RemoteCallable, RemoteModule, RemoteObject, RemoteValue
from openenv_sdk.grading.remote import DEFAULT_TIMEOUT_S, RemoteSession, install_remote_modules

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "ChannelError",
    "CodecError",
    "Limits",
    "NotSendable",
    "ProtocolError",
    "RemoteCallable",
    "RemoteError",
    "RemoteModule",
    "RemoteObject",
    "RemoteSession",
    "RemoteTimeout",
    "RemoteValue",
    "SolutionImportError",
    "Spawn",
    "StaleHandle",
    "WorkerDied",
    "install_remote_modules",
    "prefixed_spawn",
    "spawn_subprocess",
]
