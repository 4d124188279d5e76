"""A scripted policy on a real OpenAI-compatible server, and Wordle served on a real port."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from openenv_sdk import create_app
from openenv_sdk.loader import load_environment
from openenv_sdk.testing import serve_app
from tests.evaluation.policy_server import WORDLE_DIR, policy_app


@pytest.fixture
def policy_server() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """The scripted policy's API root (`.../v1`) and the requests it has received."""
    seen: list[dict[str, Any]] = []
    with serve_app(policy_app(seen)) as url:
        yield f"{url}/v1", seen


@pytest.fixture
def wordle_url() -> Iterator[str]:
    """Wordle served in this process on a free port."""
    with serve_app(create_app(load_environment(WORDLE_DIR).env_cls)) as url:
        yield url
