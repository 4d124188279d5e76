"""The documentation site builds with no warning (`mkdocs build --strict`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytest.importorskip("mkdocs", reason="the docs extra is not installed: pip install -e '.[docs]'")
pytest.importorskip("material", reason="the docs extra is not installed: pip install -e '.[docs]'")
pytest.importorskip("mkdocstrings_handlers.python", reason="the docs extra is not installed: pip install -e '.[docs]'")


@pytest.mark.timeout(300)
def test_the_site_builds_with_no_warning(tmp_path: Path) -> None:
    site = tmp_path / "site"
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "WARNING" not in result.stderr, result.stderr
    for page in ["index.html", "quickstart/index.html", "tutorial/index.html", "reference/cli/index.html",
                 "reference/python/index.html", "manifest/index.html", "protocol/index.html", "playground/index.html",
                 "protocol/ws-messages.json", "protocol/openapi.json", "img/playground.png"]:
        assert (site / page).is_file(), page
    api = (site / "reference" / "python" / "index.html").read_text(encoding="utf-8")
    assert "create_app" in api and "GenericEnvClient" in api and "Grader" in api
