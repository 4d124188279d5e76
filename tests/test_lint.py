"""The code passes the project's lint rules ([tool.ruff] and [tool.mypy] in pyproject.toml), as CI enforces.

mypy runs through scripts/typecheck.py: here the SDK and every environment (this venv has their
libraries); the trainers' suites check trainers/ in their own venvs.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

_spec = importlib.util.spec_from_file_location("typecheck", ROOT / "scripts" / "typecheck.py")
assert _spec is not None and _spec.loader is not None
typecheck = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("typecheck", typecheck)  # its dataclasses look their module up there
_spec.loader.exec_module(typecheck)


def test_ruff_finds_nothing() -> None:
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    assert ruff is not None, "ruff is in the dev extras: pip install -e '.[dev]'"
    result = subprocess.run([ruff, "check", "--output-format", "concise", str(ROOT)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


@pytest.fixture(scope="module")
def mypy_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache for this module's runs (each environment's run reads the SDK once), fresh each session."""
    assert importlib.util.find_spec("mypy") is not None, "mypy is in the dev extras: pip install -e '.[dev]'"
    return tmp_path_factory.mktemp("mypy-cache")


@pytest.mark.timeout(1300)
def test_mypy_finds_nothing_in_the_sdk(mypy_cache: Path) -> None:
    # every body in openenv_sdk checked, no stale `# type: ignore`
    [run] = typecheck.runs_for("openenv_sdk")
    result = typecheck.check(run, cache_dir=mypy_cache)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "Success: no issues found" in result.stdout


@pytest.mark.timeout(1300)
@pytest.mark.parametrize("name", typecheck.environment_names())
def test_mypy_finds_nothing_in_the_environment(name: str, mypy_cache: Path) -> None:
    [run] = typecheck.runs_for(f"environments/{name}")
    assert run.files, f"environments/{name} has no modules"
    result = typecheck.check(run, cache_dir=mypy_cache)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert f"Success: no issues found in {len(run.files)} source file" in result.stdout


def test_every_environment_is_checked() -> None:
    # a new environment folder joins the check without anyone listing it
    names = typecheck.environment_names()
    assert {"coding", "echo", "mini_swe", "terminal", "wordle"} <= set(names)
    assert [r.name for r in typecheck.runs_for("environments")] == [f"environments/{n}" for n in names]


@pytest.mark.timeout(600)
def test_a_type_error_in_an_environment_fails_the_check(tmp_path: Path) -> None:
    # the check is not vacuous: a copy of an environment with one bad call, checked the same way
    env = tmp_path / "broken"
    shutil.copytree(ROOT / "environments" / "wordle", env, ignore=shutil.ignore_patterns("tests", "*.txt", "__pycache__"))
    module = env / "wordle_env.py"
    module.write_text(module.read_text() + "\n\ndef _broken() -> int:\n    return len(3)\n")
    result = typecheck.check(typecheck.Run("broken", files=sorted(env.glob("*.py")), path=[env]))
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"{module}:" in result.stdout
    assert 'Argument 1 to "len" has incompatible type "int"' in result.stdout
