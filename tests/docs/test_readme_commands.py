"""The README's two commands, as a newcomer runs them: in a fresh copy of this checkout.

Slow (a venv is built from nothing, about two minutes); CI runs it. The commands are read from
the README itself, so the test follows the README and fails when either command breaks.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.timeout(1500)


def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## The two commands", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```bash\n(.*?)\n```", section, flags=re.S)


def _fresh_copy(dest: Path) -> None:
    # what a clone of this checkout holds: tracked files and new files git does not ignore
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, check=True, timeout=60,
    ).stdout.decode().split("\0")  # fmt: skip
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)


def test_the_readme_shows_two_commands() -> None:
    commands = _readme_commands()
    assert len(commands) == 2, commands
    assert "examples/quickstart.py" in commands[0]
    assert commands[1].startswith("bash scripts/test.sh")


def test_the_two_commands_work_from_a_fresh_copy(tmp_path: Path) -> None:
    setup, tests = _readme_commands()
    _fresh_copy(tmp_path)
    assert not (tmp_path / ".venv").exists()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTEST_"))}

    first = subprocess.run(["bash", "-c", setup], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert re.search(r"reward 1\.\d{3}", first.stdout), first.stdout[-3000:]

    # The test command exactly as written, on the main suite and one small file of it: the whole
    # suite is this run itself. OPENENV_TEST_SUITES and PYTEST_ADDOPTS are scripts/test.sh's and
    # pytest's own knobs.
    env |= {"OPENENV_TEST_SUITES": "main", "PYTEST_ADDOPTS": "-p no:cacheprovider tests/test_errors.py"}
    second = subprocess.run(["bash", "-c", tests], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1200)
    output = second.stdout + second.stderr
    assert second.returncode == 0, output[-5000:]
    assert re.search(r"\d+ passed", second.stdout), output[-3000:]
    assert "enabled: sandbox" in second.stderr, second.stderr[-3000:]
