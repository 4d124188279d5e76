"""Rendering a table."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .cells import cell_text, escape

_ALIGNS = ("left", "right", "center", None)
MIN_WIDTH = 3  # a separator cell needs at least three characters: ---


def render(
    headers: Sequence[Any], rows: Sequence[Sequence[Any]], *, align: Sequence[str | None] | None = None
) -> str:
    """A Markdown table with padded, aligned columns.

    Rows shorter than the header are padded with empty cells; longer rows are an error.
    `align` gives each column's alignment: `left`, `right`, `center` or `None` (default).
    """
    ncols = len(headers)
    if ncols == 0:
        raise ValueError("a table needs at least one column")
    aligns = list(align) if align is not None else [None] * ncols
    if len(aligns) != ncols or any(a not in _ALIGNS for a in aligns):
        raise ValueError(f"align must give one of {_ALIGNS} per column")
    table = [[cell_text(h) for h in headers]]
    for index, row in enumerate(rows):
        if len(row) > ncols:
            raise ValueError(f"row {index} has {len(row)} cells; the header has {ncols}")
        table.append([cell_text(v) for v in row] + [""] * (ncols - len(row)))
    widths = [max(MIN_WIDTH, *(len(line[c]) for line in table)) for c in range(ncols)]
    lines = [_line(table[0], widths, aligns), _separator(widths, aligns)]
    lines.extend(_line(line, widths, aligns) for line in table[1:])
    return "\n".join(lines)


def _pad(text: str, width: int, align: str | None) -> str:
    if align == "right":
        return text.rjust(width)
    if align == "center":
        return text.center(width)
    return text.ljust(width)


def _line(cells: list[str], widths: list[int], aligns: list[str | None]) -> str:
    return "| " + " | ".join(escape(_pad(c, w, a)) for c, w, a in zip(cells, widths, aligns)) + " |"


def _separator(widths: list[int], aligns: list[str | None]) -> str:
    parts = []
    for width, align in zip(widths, aligns):
        if align == "left":
            parts.append(":" + "-" * (width - 1))
        elif align == "right":
            parts.append("-" * (width - 1) + ":")
        elif align == "center":
            parts.append(":" + "-" * (width - 2) + ":")
        else:
            parts.append("-" * width)
    return "| " + " | ".join(parts) + " |"
