"""The code passes the project's lint rules ([tool.ruff] in pyproject.toml), as CI enforces."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_finds_nothing() -> None:
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    assert ruff is not None, "ruff is in the dev extras: pip install -e '.[dev]'"
    result = subprocess.run([ruff, "check", "--output-format", "concise", str(ROOT)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def test_mypy_finds_nothing() -> None:
    # [tool.mypy] in pyproject.toml: every body in openenv_sdk checked, no stale `# type: ignore`
    mypy = shutil.which("mypy", path=str(Path(sys.executable).parent)) or shutil.which("mypy")
    assert mypy is not None, "mypy is in the dev extras: pip install -e '.[dev]'"
    result = subprocess.run([mypy, "--no-incremental"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "Success: no issues found" in result.stdout
