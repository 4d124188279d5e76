"""Grading an untrusted solution from a trusted process: proxies of the solution's modules whose
calls run in a worker process (`remote`), and a pytest plugin that installs them (`pytest_remote`).
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
