"""The server: `create_app(EnvClass)` and its configuration."""

from ._app import ServerConfig, create_app

__all__ = ["ServerConfig", "create_app"]
