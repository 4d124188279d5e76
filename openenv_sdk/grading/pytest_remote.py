"""pytest plugin: the tests import the solution through proxies; its code runs in a worker process.

Load it explicitly, in a trusted directory that holds only the tests:

    python -I -m pytest -p openenv_sdk.grading.pytest_remote \\
        --remote-modules solution --remote-dir /path/to/solution \\
        --remote-spawn-prefix '["bwrap", "--die-with-parent", ..., "--"]' \\
        --remote-timeout 10 tests/

Options (each also read from an environment variable, the option winning):

- `--remote-modules` (`OPENENV_REMOTE_MODULES`): comma-separated module names of the solution;
  without it the plugin does nothing.
- `--remote-dir` (`OPENENV_REMOTE_DIR`): the directory holding the solution's files, the worker's
  working directory. Required with `--remote-modules`.
- `--remote-spawn-prefix` (`OPENENV_REMOTE_SPAWN_PREFIX`): a JSON array of strings put before the
  worker's command (`[python, "-I", "-S", "-c", script, config]`), e.g. a sandbox launcher.
- `--remote-python` (`OPENENV_REMOTE_PYTHON`): the worker's interpreter (default: this one).
- `--remote-timeout` (`OPENENV_REMOTE_TIMEOUT_S`): limit of each call, in seconds (default 10).
- `--remote-equality` (`OPENENV_REMOTE_EQUALITY=1`): the solution's `__eq__`, `__ne__` and
  `__hash__` decide `==`, `!=` and `hash()` between two of its objects (see `RemoteObject`).

A failed test's report gets a "solution output" section: the tail of what the solution printed.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from openenv_sdk.grading._channel import prefixed_spawn
from openenv_sdk.grading.remote import DEFAULT_TIMEOUT_S, RemoteSession

__all__: list[str] = []

_SESSION = pytest.StashKey[RemoteSession]()
_OPTIONS = {
    "remote_modules": "OPENENV_REMOTE_MODULES",
    "remote_dir": "OPENENV_REMOTE_DIR",
    "remote_spawn_prefix": "OPENENV_REMOTE_SPAWN_PREFIX",
    "remote_python": "OPENENV_REMOTE_PYTHON",
    "remote_timeout": "OPENENV_REMOTE_TIMEOUT_S",
    "remote_equality": "OPENENV_REMOTE_EQUALITY",
}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("remote", "the solution runs in a worker process (openenv_sdk.grading)")
    group.addoption("--remote-modules", help="comma-separated module names of the solution, e.g. 'solution'")
    group.addoption("--remote-dir", help="the directory holding the solution's files (the worker's cwd)")
    group.addoption("--remote-spawn-prefix", help="JSON array of strings put before the worker's command")
    group.addoption("--remote-python", help="the worker's Python interpreter (default: this one)")
    group.addoption("--remote-timeout", help=f"limit of each call, in seconds (default {DEFAULT_TIMEOUT_S:g})")
    group.addoption(
        "--remote-equality",
        action="store_const",
        const="1",
        help="the solution's __eq__/__ne__/__hash__ decide ==, != and hash() between two of its objects",
    )


def _option(config: pytest.Config, name: str) -> str | None:
    value = config.getoption(name)
    return value if value is not None else os.environ.get(_OPTIONS[name])


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    modules = _option(config, "remote_modules")
    if not modules:
        return
    directory = _option(config, "remote_dir")
    if not directory or not Path(directory).is_dir():
        raise pytest.UsageError(f"--remote-dir must name the solution's directory, got {directory!r}")
    prefix = json.loads(_option(config, "remote_spawn_prefix") or "[]")
    if not isinstance(prefix, list) or not all(isinstance(word, str) for word in prefix):
        raise pytest.UsageError('--remote-spawn-prefix must be a JSON array of strings, e.g. ["bwrap", "--"]')
    timeout = _option(config, "remote_timeout")
    try:
        session = RemoteSession(
            [name.strip() for name in modules.split(",") if name.strip()],
            directory,
            spawn=prefixed_spawn(prefix),
            python=_option(config, "remote_python") or sys.executable,
            timeout_s=float(timeout) if timeout else DEFAULT_TIMEOUT_S,
            remote_equality=_option(config, "remote_equality") == "1",
        )
        session.install()
    except ValueError as e:
        raise pytest.UsageError(f"remote grading: {e}") from None
    config.stash[_SESSION] = session


def pytest_unconfigure(config: pytest.Config) -> None:
    session = config.stash.get(_SESSION, None)
    if session is not None:
        session.close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Any:
    report = yield
    session = item.config.stash.get(_SESSION, None)
    if session is not None and report.failed and call.when == "call":
        output = session.output()[-4000:]
        if output.strip():
            report.sections.append(("solution output (tail)", output))
    return report
