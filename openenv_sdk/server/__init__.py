"""The server: `create_app(EnvClass)` and its configuration."""

from ._app import create_app, uvicorn_limits
from ._auth import ORCHESTRATOR_TOKEN_VAR
from ._config import ServerConfig

__all__ = ["ORCHESTRATOR_TOKEN_VAR", "ServerConfig", "create_app", "uvicorn_limits"]
