"""Reading rows with a sniffed (or given) dialect."""

from __future__ import annotations

from .sniffer import Dialect, sniff, split_row


def read_rows(text: str, dialect: Dialect | None = None) -> list[list[str]]:
    """All non-blank lines of `text` split into fields; the dialect is sniffed when not given."""
    dialect = dialect or sniff(text)
    return [split_row(line, dialect.delimiter, dialect.quotechar) for line in text.splitlines() if line.strip()]
