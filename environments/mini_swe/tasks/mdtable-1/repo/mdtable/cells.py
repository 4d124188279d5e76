"""Turning values into cell text."""

from __future__ import annotations

from typing import Any


def cell_text(value: Any) -> str:
    """The text of one cell: `None` is empty, floats use `:g`, newlines become `<br>`."""
    if value is None:
        return ""
    if isinstance(value, float):
        text = f"{value:g}"
    else:
        text = str(value)
    return text.replace("\r\n", "\n").replace("\n", "<br>")


def escape(text: str) -> str:
    """Escape the column separator so it shows as a literal `|`."""
    return text.replace("|", "\\|")
