"""Type-check the repository with mypy, part by part, under `[tool.mypy]` in pyproject.toml.

    .venv/bin/python scripts/typecheck.py openenv_sdk            # what `mypy` alone does
    .venv/bin/python scripts/typecheck.py environments           # each environment, one run each
    .venv/bin/python scripts/typecheck.py environments/coding
    .venv-trainers/bin/python scripts/typecheck.py trainers      # against torch, transformers, TRL
    .venv-adapters/bin/python scripts/typecheck.py adapters      # against verifiers, SkyRL, ART, verl

Each part runs with the mypy of the interpreter that runs this script, in the venv that has the
libraries it is checked against (CI: tests/test_lint.py, trainers/tests/test_typecheck.py,
trainers/adapter_tests/test_typecheck.py).

- An environment is its folder's top-level modules (its tests, like the SDK's, and its hidden
  data are not checked), with the folder on the path: they import each other by bare name. One
  run per environment, because each has its own `grader` (and `conftest`) module.
- `trainers` is `openenv_trainers` but for the adapters of third-party trainers, which
  `adapters` checks (with `openenv_trainers_verifiers`) where those trainers are installed.
- What a part imports from another part is read, not reported (`--follow-imports=silent`): each
  part's errors are reported by its own run.

Exit status 0 when every run finds nothing; the output is mypy's, a header per run.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRAINERS = ROOT / "trainers"
ADAPTERS = TRAINERS / "openenv_trainers" / "adapters"
RUN_TIMEOUT_S = 1200.0  # one mypy run over the trainers, cold, on a small shared machine: ~3 min


@dataclass(frozen=True)
class Run:
    """One mypy run: its files, and the folders its bare-name imports resolve from."""

    name: str
    files: list[Path] = field(default_factory=list)
    path: list[Path] = field(default_factory=list)
    own_config_files: bool = False  # `openenv_sdk`: the `files` of [tool.mypy]


def environment_names() -> list[str]:
    return sorted(p.parent.name for p in (ROOT / "environments").glob("*/openenv.yaml") if any(p.parent.glob("*.py")))


def _third_party_adapters() -> list[Path]:
    return sorted(p for p in ADAPTERS.glob("*.py") if not p.name.startswith("_"))


def runs_for(part: str) -> list[Run]:
    """The runs that check `part`.

    Raises:
        ValueError: an unknown part (the message names the known ones).
    """
    envs = environment_names()
    if part == "openenv_sdk":
        return [Run("openenv_sdk", own_config_files=True)]
    if part == "environments":
        return [run for name in envs for run in runs_for(f"environments/{name}")]
    if part.startswith("environments/") and part.removeprefix("environments/") in envs:
        folder = ROOT / part
        return [Run(part, files=sorted(folder.glob("*.py")), path=[folder])]
    if part == "trainers":
        adapters = set(_third_party_adapters())
        files = sorted(p for p in (TRAINERS / "openenv_trainers").rglob("*.py") if p not in adapters)
        return [Run("trainers", files=files)]
    if part == "adapters":
        return [Run("adapters", files=[*_third_party_adapters(), *sorted((TRAINERS / "openenv_trainers_verifiers").rglob("*.py"))])]
    known = ["openenv_sdk", "environments", *(f"environments/{n}" for n in envs), "trainers", "adapters"]
    raise ValueError(f"unknown part {part!r}; the parts are {', '.join(known)}")


def mypy_command(run: Run, *, cache_dir: Path | None) -> list[str]:
    command = [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml")]
    # A cache that outlives a run could hide a change; without a folder given, none is kept.
    command += ["--cache-dir", str(cache_dir)] if cache_dir else ["--no-incremental", "--cache-dir", os.devnull]
    if not run.own_config_files:
        command += ["--follow-imports", "silent", *(str(f.relative_to(ROOT) if f.is_relative_to(ROOT) else f) for f in run.files)]
    return command


def check(run: Run, *, cache_dir: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run mypy for `run` in the repository root; its exit status and output, as they are."""
    env = dict(os.environ)
    # openenv_sdk from the tree (an editable install's import hook is invisible to mypy), then the run's folders.
    env["MYPYPATH"] = os.pathsep.join(str(p) for p in [*run.path, ROOT])
    return subprocess.run(
        mypy_command(run, cache_dir=cache_dir), cwd=ROOT, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("parts", nargs="+", help="openenv_sdk, environments, environments/NAME, trainers or adapters")
    parser.add_argument("--cache-dir", type=Path, help="mypy's cache folder (default: none kept, every run cold)")
    args = parser.parse_args(argv)
    try:
        runs = [run for part in args.parts for run in runs_for(part)]
    except ValueError as e:
        parser.error(str(e))
    failed = []
    for run in runs:
        print(f"== mypy: {run.name}", flush=True)
        result = check(run, cache_dir=args.cache_dir)
        sys.stdout.write(result.stdout + result.stderr)
        if result.returncode != 0:
            failed.append(run.name)
    if failed:
        print(f"== mypy found errors in: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
