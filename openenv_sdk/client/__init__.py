"""Clients of environment servers: the orchestrator's reset/step/state, and the agent's MCP tools.

    EnvClient / AsyncEnvClient                 typed by the environment's models
    GenericEnvClient / AsyncGenericEnvClient   dict actions, checked against the server's /schema

Both pairs share their method names (`reset`, `step`, `state`, `call`, `session`, `mcp_url`,
`list_tools`, `call_tool`, `reconnect`, `restart`); the async ones are awaited and close with
`aclose()`. A client connects to `base_url`, or starts its own server from `env_dir=` (a local
process), `image=` (a container) or any `provider=`; its other keywords are `ClientOptions`.

`_async.py` is the source of the clients; `_sync.py` is generated from it (`scripts/unasync.py`).
"""

from ._async import AsyncEnvClient
from ._generic import AsyncGenericEnvClient, GenericEnvClient
from ._models import StepResult, Trajectory, TrajectoryStep
from ._options import DEFAULT_CONNECT_TIMEOUT_S, DEFAULT_STARTUP_TIMEOUT_S, DEFAULT_TIMEOUT_S, ClientOptions
from ._sync import EnvClient

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT_S",
    "DEFAULT_STARTUP_TIMEOUT_S",
    "DEFAULT_TIMEOUT_S",
    "AsyncEnvClient",
    "AsyncGenericEnvClient",
    "ClientOptions",
    "EnvClient",
    "GenericEnvClient",
    "StepResult",
    "Trajectory",
    "TrajectoryStep",
]
