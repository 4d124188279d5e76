"""The sections of docs/benchmarks.md that each benchmark writes between its own markers
(`<!-- NAME: begin -->` ... `<!-- NAME: end -->`), so that one benchmark's `--write-docs` keeps
the others' sections."""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["marked_sections", "write_marked_section"]


def marked_sections(text: str) -> str:
    """Every marked section of a page, in order (what bench_echo.py keeps when it rewrites it)."""
    return "\n\n".join(m.group(0) for m in re.finditer(r"<!-- (\w+): begin -->.*?<!-- \1: end -->", text, re.S))


def write_marked_section(path: Path, begin: str, end: str, section: str) -> None:
    """Put `section` (its first line `begin`, its last `end`) where the page has that section, or
    at its end."""
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        text = head + section.rstrip("\n") + rest.split(end, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + section.rstrip("\n") + "\n"
    path.write_text(text, encoding="utf-8")
