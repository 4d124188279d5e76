"""docs/reference/api.md, the Python API reference as Markdown for the repository, is generated
from the docstrings and the site page's directives (scripts/gen_api_docs.py), and up to date."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_markdown_reference_is_up_to_date() -> None:
    result = subprocess.run([sys.executable, "scripts/gen_api_docs.py", "--check"], cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr


def test_it_holds_every_object_of_the_site_page_and_no_dead_anchor() -> None:
    site = (ROOT / "docs" / "reference" / "python.md").read_text()
    markdown = (ROOT / "docs" / "reference" / "api.md").read_text()
    for path in re.findall(r"^::: (\S+)$", site, re.M):
        assert f"`{path}`" in markdown or f"`{path}." in markdown, path
    assert ":::" not in markdown
    assert re.search(r"\]\(#", markdown) is None  # anchors GitHub would not resolve
    assert "Set it to True from a tool (e.g. `submit`) to end the episode" in markdown  # a docstring, verbatim
