"""mypy finds nothing in openenv_trainers (its adapters of third-party trainers aside: adapter_tests
checks those), under the repository's [tool.mypy] and against this venv's torch, transformers and TRL."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(1300)
def test_mypy_finds_nothing_in_the_trainers() -> None:
    assert importlib.util.find_spec("mypy") is not None, "scripts/setup_trainers_venv.sh installs mypy"
    spec = importlib.util.spec_from_file_location("typecheck", REPO / "scripts" / "typecheck.py")
    assert spec is not None and spec.loader is not None
    typecheck = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("typecheck", typecheck)  # its dataclasses look their module up there
    spec.loader.exec_module(typecheck)
    [run] = typecheck.runs_for("trainers")
    assert REPO / "trainers" / "openenv_trainers" / "trl_env.py" in run.files
    assert not any(f.parent.name == "adapters" and not f.name.startswith("_") for f in run.files)
    result = typecheck.check(run)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert f"Success: no issues found in {len(run.files)} source files" in result.stdout
