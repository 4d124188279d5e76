"""Fixtures of the coding environment's tests.

The server is fed a copy of the environment folder *without* `hidden/` (as the image holds it),
and the grader reads a host-private copy of `hidden/` (mode 0700), so these tests see what a
deployment sees: the agent's side never has the hidden tests.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from coding_support import CODING_DIR, coding_grader, connect

from openenv_sdk.client import GenericEnvClient


@pytest.fixture(scope="session")
def served_dir() -> Iterator[Path]:
    """The environment folder as the image holds it: no hidden/, no tests/, readable by all
    (as the image's /env is)."""
    holder = Path(tempfile.mkdtemp(prefix="coding-served-"))
    try:
        holder.chmod(0o755)
        target = holder / "coding"
        shutil.copytree(CODING_DIR, target, ignore=shutil.ignore_patterns("hidden", "tests", "__pycache__", "*.pyc"))
        yield target
    finally:
        shutil.rmtree(holder, ignore_errors=True)


@pytest.fixture(scope="session")
def private_hidden(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A host-private copy of hidden/ (its folder is 0700): what the grader reads."""
    holder = tmp_path_factory.mktemp("host-private")
    holder.chmod(0o700)
    target = holder / "hidden"
    shutil.copytree(CODING_DIR / "hidden", target)
    return target


@pytest.fixture(scope="session")
def grader(private_hidden: Path) -> Any:
    return coding_grader.CodingGrader(private_hidden)


@pytest.fixture(scope="session")
def coding_server(served_dir: Path) -> Iterator[GenericEnvClient]:
    """One `openenv serve` of the served folder for the whole run (started by a client with
    `env_dir=`); tests open more sessions on it with `coding_support.connect(owner)`."""
    with GenericEnvClient(env_dir=served_dir, startup_timeout_s=90) as owner:
        yield owner


@pytest.fixture
def session(coding_server: GenericEnvClient) -> Iterator[GenericEnvClient]:
    """A fresh session (episode not started yet) on the shared server."""
    with connect(coding_server) as client:
        yield client
