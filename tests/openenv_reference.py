"""Where the public OpenEnv package (`openenv`) is installed for the compatibility tests.

The test command (scripts/test.sh) builds it with `benchmarks/setup_openenv_venv.sh --openenv-only`
in `.bench/openenv-venv` and sets `OPENENV_REFERENCE_VENV`; when that variable is set, a missing
interpreter is an error, not a skip.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
VENV = Path(os.environ.get("OPENENV_REFERENCE_VENV") or REPO / ".bench" / "openenv-venv")
OPENENV_PYTHON = VENV / "bin" / "python"
OPENENV_CLI = VENV / "bin" / "openenv"


def require(path: Path) -> Path:
    """`path` (OpenEnv's interpreter or CLI); skip only where nobody asked for OpenEnv."""
    if path.exists():
        return path
    if os.environ.get("OPENENV_REFERENCE_VENV"):
        pytest.fail(f"{path} is missing although OPENENV_REFERENCE_VENV is set (bash benchmarks/setup_openenv_venv.sh)")
    pytest.skip(f"OpenEnv is not installed in {VENV} (bash benchmarks/setup_openenv_venv.sh --openenv-only)")
    raise AssertionError  # unreachable
