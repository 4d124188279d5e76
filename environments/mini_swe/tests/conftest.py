"""Shared fixtures of mini_swe's tests: the environment in-process, and one served over the wire."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from mini_swe_testkit import ENV_DIR, register_server


@pytest.fixture
def env() -> Iterator[Any]:
    """A `MiniSweEnvironment` in this process; closed (workspace removed) afterwards."""
    from mini_swe_env import MiniSweEnvironment

    instance = MiniSweEnvironment()
    try:
        yield instance
    finally:
        instance.close()


@pytest.fixture(scope="session")
def server_url() -> Iterator[str]:
    """One server for this folder, started by `GenericEnvClient(env_dir=...)` (`openenv serve` in a
    local process); the wire tests open their sessions on it in parallel."""
    from openenv_sdk.client import GenericEnvClient

    with GenericEnvClient(env_dir=ENV_DIR, startup_timeout_s=120) as owner:
        owner.connect()
        assert owner.base_url is not None
        yield register_server(owner)
