"""The write-or-check step every generated-doc script ends with (`gen_*.py`).

    python scripts/gen_x.py          # rewrite its files
    python scripts/gen_x.py --check  # exit 1, naming each stale file, if any differs

A script imports this module by bare name: `scripts/` is on the path when the script is run, and
the script adds it when loaded by file path (`importlib.util.spec_from_file_location`, as the tests do).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def shown(path: Path) -> str:
    """`path` as the repository names it (relative to its root), or whole if outside it."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def stale(files: Mapping[Path, str]) -> list[Path]:
    """The files (absolute paths) whose text on disk is not `files[path]`, a missing one included."""
    return [path for path, text in files.items() if not path.is_file() or path.read_text(encoding="utf-8") != text]


def write_or_check(files: Mapping[Path, str], *, script: str, argv: Sequence[str] | None = None) -> int:
    """With `--check` in `argv` (default: the command line), 1 if any of `files` is stale (each
    named on stderr, with the command that rewrites it: `python scripts/<script>`), else 0;
    without it, write each file (making its folder) and say so. `script` is the script's file name."""
    args = sys.argv[1:] if argv is None else argv
    if "--check" in args:
        outdated = stale(files)
        for path in outdated:
            print(f"{shown(path)} is stale: run python scripts/{script}", file=sys.stderr)
        return 1 if outdated else 0
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(f"wrote {shown(path)}")
    return 0
