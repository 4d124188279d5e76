"""docs/tutorial.md runs as written: its code blocks, in order, in a fresh temporary folder.

- a block with `title="PATH"` is written to PATH (the environment's files);
- a `bash` block without a title is run by bash, with this venv's `openenv` and `python` first on PATH;
- a `python` block without a title is run as a script by this interpreter;
- `<!-- tutorial: skip (why) -->` before a block leaves it out (a server that runs until Ctrl-C);
- `<!-- tutorial: containers -->` before a block runs it only when OPENENV_TEST_CONTAINERS=1;
- `<!-- tutorial: output -->` before a `text` block: what the block run just before it prints, exactly.

Other blocks (`text`, `yaml` without a title) are shown output and are not run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TUTORIAL = ROOT / "docs" / "tutorial.md"

_FENCE = re.compile(
    r"(?:<!-- tutorial: (?P<marker>skip|containers|output)[^>]*-->\n)?"
    r"```(?P<lang>\w+)(?P<attrs>[^\n]*)\n(?P<code>.*?)\n```",
    re.DOTALL,
)
_TITLE = re.compile(r'title="([^"]+)"')


@dataclass(frozen=True)
class Block:
    lang: str
    code: str
    path: str | None
    marker: str | None
    line: int

    @property
    def runs(self) -> bool:
        return self.path is None and self.lang in ("bash", "python")


def tutorial_blocks(text: str) -> list[Block]:
    blocks = []
    for match in _FENCE.finditer(text):
        title = _TITLE.search(match["attrs"])
        line = text.count("\n", 0, match.start("lang")) + 1
        blocks.append(Block(match["lang"], match["code"] + "\n", title[1] if title else None, match["marker"], line))
    return blocks


def test_the_tutorial_marks_what_it_runs() -> None:
    blocks = tutorial_blocks(TUTORIAL.read_text(encoding="utf-8"))
    files = [b.path for b in blocks if b.path]
    assert files == [
        "hangman/hangman_env.py",
        "hangman/grader.py",
        "hangman/openenv.yaml",
        "hangman/tests/test_hangman.py",
    ]
    commands = [b.code.split()[0:2] for b in blocks if b.runs and b.lang == "bash"]
    assert ["openenv", "init"] in commands and ["openenv", "validate"] in commands and ["openenv", "build"] in commands
    assert any(b.runs and b.lang == "python" and b.marker is None for b in blocks)


@pytest.mark.timeout(600)
def test_the_tutorial_runs_as_written(tmp_path: Path) -> None:
    containers = os.environ.get("OPENENV_TEST_CONTAINERS") == "1"
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONDONTWRITEBYTECODE": "1",
        "OPENENV_DEBUG": "1",
    }
    ran: list[tuple[str, str]] = []
    outputs_checked = 0
    for block in tutorial_blocks(TUTORIAL.read_text(encoding="utf-8")):
        if block.marker == "skip" or (block.marker == "containers" and not containers):
            continue
        where = f"docs/tutorial.md:{block.line}"
        if block.marker == "output":
            assert ran, f"{where}: an output block follows no block that ran"
            assert ran[-1][1] == block.code, f"{where}: the page shows other output than {ran[-1][0]} prints"
            outputs_checked += 1
            continue
        if block.path is not None:
            target = tmp_path / block.path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(block.code, encoding="utf-8")
            continue
        if not block.runs:
            continue
        command = ["bash", "-euo", "pipefail", "-c", block.code] if block.lang == "bash" else [sys.executable, "-c", block.code]
        result = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)
        assert result.returncode == 0, f"{where} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
        ran.append((where, result.stdout))
    assert len(ran) >= 4 and outputs_checked >= 1, (ran, outputs_checked)
