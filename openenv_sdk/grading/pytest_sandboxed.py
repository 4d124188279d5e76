"""pytest plugin: a verifier's tests run in this (trusted) process; the agent's code they use does not.

For verifiers written to run beside the agent's code (Harbor's and Terminal-Bench's pytest
tests: they import the agent's modules and run its programs with `subprocess`). Loaded with
`-p openenv_sdk.grading.pytest_sandboxed` in a grading sandbox that a `ProgramRunServer` serves:

- the agent's modules (each `<name>.py` at the top of the agent's folder) are installed as
  `RemoteModule` proxies (`openenv_sdk.grading.remote`): `import fib` gives a proxy whose calls run
  in a worker started through the program-run server, in a fresh sandbox that sees the agent's
  folder read-only (it lives across tests: nothing it starts may change files they read). A name the verifier
  has itself (a module beside the tests, or on the trusted `sys.path`) stays the verifier's;
- any other import of a file under the agent's folder (a package, a `sys.path` entry the tests
  added) is refused with `ImportError`: the agent's code never runs in this interpreter;
- every process the tests start (`subprocess.*`, `os.popen`, `os.system`) runs through the
  program-run server in a fresh sandbox (its own pid namespace, no network), its output and exit
  code relayed back, except `git`, which runs here through `trusted_git` (it reads none of the
  repository's config, hooks or filters).

Settings, from the environment: `OPENENV_AGENT_DIR` (the agent's folder, such as `/app`; without
it the plugin does nothing), `OPENENV_RUN_SOCKET` and `OPENENV_RUN_CLIENT` (the server's socket
and the client script), `OPENENV_TRUSTED_GIT` (the `trusted_git.py` script), and
`OPENENV_RUN_TIMEOUT_S` (each process's and each worker's limit, default 55).

Not covered: `os.exec*`, `os.spawn*` and `os.posix_spawn` called directly, and tests that talk to
a server the agent's program started (its sandbox has a network of its own).
"""

from __future__ import annotations

import importlib.machinery
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from openenv_sdk.grading._channel import prefixed_spawn
from openenv_sdk.grading.remote import RemoteSession

__all__: list[str] = []

_SESSION = pytest.StashKey[RemoteSession]()
_RESERVED = frozenset({"conftest", "setup", "pytest", "_pytest", "pluggy", "openenv_sdk", "py"})


def _settings() -> dict[str, str] | None:
    agent_dir = os.environ.get("OPENENV_AGENT_DIR")
    if not agent_dir:
        return None
    wanted = ("OPENENV_RUN_SOCKET", "OPENENV_RUN_CLIENT", "OPENENV_TRUSTED_GIT")
    missing = [name for name in wanted if not os.environ.get(name)]
    if missing:
        raise pytest.UsageError(f"pytest_sandboxed: OPENENV_AGENT_DIR is set but {', '.join(missing)} is not")
    return {
        "agent_dir": os.path.realpath(agent_dir),
        "socket": os.environ["OPENENV_RUN_SOCKET"],
        "client": os.environ["OPENENV_RUN_CLIENT"],
        "git": os.environ["OPENENV_TRUSTED_GIT"],
        "timeout_s": os.environ.get("OPENENV_RUN_TIMEOUT_S", "55"),
    }


def _client_prefix(settings: dict[str, str], cwd: str, *, pass_env: bool, read_only: bool = False) -> list[str]:
    prefix = [sys.executable, "-I", "-S", settings["client"], "--socket", settings["socket"], "--cwd", cwd]
    prefix += ["--timeout-s", settings["timeout_s"], *(["--pass-env"] if pass_env else [])]
    return [*prefix, *(["--read-only"] if read_only else []), "--"]


class _AgentImportGuard:
    """A meta path finder that refuses modules whose file is under the agent's folder."""

    def __init__(self, agent_dir: str) -> None:
        self.agent_dir = agent_dir

    def find_spec(self, name: str, path: Sequence[str] | None = None, target: Any = None) -> None:
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        origin = getattr(spec, "origin", None) or ""
        locations = [origin, *(getattr(spec, "submodule_search_locations", None) or [])]
        for location in locations:
            if location and os.path.realpath(location).startswith(self.agent_dir + os.sep):
                raise ImportError(
                    f"{name!r} is the agent's code ({location}): the verifier does not import it; "
                    f"only the top-level modules of {self.agent_dir} are importable, as remote proxies"
                )
        return None


def _agent_modules(agent_dir: str, trusted_dirs: Sequence[Path]) -> list[str]:
    """The agent's top-level modules to proxy: not a name the verifier has itself (a module beside
    the tests, or one on the trusted `sys.path`), which the agent's file must not shadow."""
    names = []
    for path in sorted(Path(agent_dir).glob("*.py")):
        name = path.stem
        if (
            not name.isidentifier()
            or name in sys.stdlib_module_names
            or name in _RESERVED
            or name in sys.modules
            or name.startswith("test_")
            or any((d / f"{name}.py").exists() or (d / name / "__init__.py").exists() for d in trusted_dirs)
        ):
            continue
        spec = importlib.machinery.PathFinder.find_spec(name)
        origin = getattr(spec, "origin", None)
        if spec is not None and not (origin and os.path.realpath(origin).startswith(agent_dir + os.sep)):
            continue
        names.append(name)
    return names


def _test_dirs(config: pytest.Config) -> list[Path]:
    """The folders of the tests pytest was given, and its root: where the verifier's own modules are."""
    dirs = {Path(config.rootpath)}
    for arg in config.args:
        path = Path(str(arg).split("::", 1)[0])
        if not path.is_absolute():
            path = Path(config.invocation_params.dir) / path
        dirs.add(path if path.is_dir() else path.parent)
    return sorted(dirs)


def _patch_processes(settings: dict[str, str]) -> None:
    original_init = subprocess.Popen.__init__

    def init(self: subprocess.Popen[Any], args: Any, *rest: Any, **kwargs: Any) -> None:
        if rest:
            raise TypeError("pytest_sandboxed: pass subprocess.Popen's options by keyword")
        shell = kwargs.pop("shell", False)
        kwargs.pop("executable", None)
        if shell:
            argv = ["/bin/sh", "-c", args if isinstance(args, str) else " ".join(map(str, args))]
        elif isinstance(args, (str, bytes, os.PathLike)):
            argv = [os.fsdecode(args)]
        else:
            argv = [os.fsdecode(a) for a in args]
        ours = argv[:4] in ([sys.executable, "-I", "-S", settings["client"]], [sys.executable, "-I", "-S", settings["git"]])
        if ours:  # the client itself (a remote-module worker's), or trusted git
            pass
        elif os.path.basename(argv[0]) == "git":
            argv = [sys.executable, "-I", "-S", settings["git"], *argv[1:]]
        else:
            cwd = os.path.abspath(os.fsdecode(kwargs.get("cwd") or os.getcwd()))
            argv = [*_client_prefix(settings, cwd, pass_env=kwargs.get("env") is not None), *argv]
        original_init(self, argv, **kwargs)

    subprocess.Popen.__init__ = init  # type: ignore[method-assign]

    def system(command: Any) -> int:
        return subprocess.call(os.fsdecode(command), shell=True)

    os.system = system


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    settings = _settings()
    if settings is None:
        return
    agent_dir = settings["agent_dir"]
    modules = _agent_modules(agent_dir, _test_dirs(config))
    if modules:
        # read-only: the worker lives across tests, and what it starts must not change the files
        # they read (a process a test starts runs, and ends, within that test)
        spawn = prefixed_spawn(_client_prefix(settings, agent_dir, pass_env=False, read_only=True))
        session = RemoteSession(
            modules, agent_dir, spawn=spawn, python=sys.executable, timeout_s=float(settings["timeout_s"])
        )
        config.stash[_SESSION] = session.install()
    sys.meta_path.insert(0, _AgentImportGuard(agent_dir))
    _patch_processes(settings)


def pytest_unconfigure(config: pytest.Config) -> None:
    session = config.stash.get(_SESSION, None)
    if session is not None:
        session.close()
