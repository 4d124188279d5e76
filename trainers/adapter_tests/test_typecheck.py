"""mypy finds nothing in the adapters of third-party trainers and the verifiers plugin, under the
repository's [tool.mypy] and against the trainers this venv installs (verifiers, SkyRL, ART, verl)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(1300)
def test_mypy_finds_nothing_in_the_adapters() -> None:
    assert importlib.util.find_spec("mypy") is not None, "scripts/setup_trainer_adapters.sh installs mypy"
    spec = importlib.util.spec_from_file_location("typecheck", REPO / "scripts" / "typecheck.py")
    assert spec is not None and spec.loader is not None
    typecheck = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("typecheck", typecheck)  # its dataclasses look their module up there
    spec.loader.exec_module(typecheck)
    [run] = typecheck.runs_for("adapters")
    adapters = REPO / "trainers" / "openenv_trainers" / "adapters"
    assert {adapters / f"{n}.py" for n in ("art", "skyrl", "verifiers", "verl")} <= set(run.files)
    result = typecheck.check(run)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert f"Success: no issues found in {len(run.files)} source files" in result.stdout
