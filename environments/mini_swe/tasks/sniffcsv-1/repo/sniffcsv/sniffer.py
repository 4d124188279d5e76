"""Guessing a dialect from a sample of lines."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

CANDIDATES = (",", ";", "\t", "|")
MAX_LINES = 50


class SniffError(ValueError):
    """The sample does not reveal a dialect."""


@dataclass(frozen=True)
class Dialect:
    delimiter: str
    quotechar: str = '"'
    has_header: bool = False


def sniff(sample: str, candidates: tuple[str, ...] = CANDIDATES) -> Dialect:
    """Guess the dialect of `sample` (the first lines of a file).

    Raises:
        SniffError: the sample is empty, or no candidate splits its lines consistently.
    """
    lines = [line for line in sample.splitlines() if line.strip()][:MAX_LINES]
    if not lines:
        raise SniffError("empty sample")
    quotechar = _guess_quotechar(lines)
    delimiter = _guess_delimiter(lines, candidates)
    return Dialect(delimiter, quotechar, _looks_like_header(lines, delimiter, quotechar))


def _guess_quotechar(lines: list[str]) -> str:
    singles = sum(line.count("'") for line in lines)
    doubles = sum(line.count('"') for line in lines)
    return "'" if singles > doubles and singles % 2 == 0 else '"'


def _guess_delimiter(lines: list[str], candidates: tuple[str, ...]) -> str:
    best: tuple[float, int] | None = None
    chosen = None
    for candidate in candidates:
        counts = [line.count(candidate) for line in lines]
        modal, seen = Counter(counts).most_common(1)[0]
        if modal == 0:
            continue
        consistency = seen / len(counts)
        if consistency < 0.9:
            continue
        score = (consistency, modal)
        if best is None or score > best:
            best, chosen = score, candidate
    if chosen is None:
        raise SniffError(f"could not determine the delimiter (tried {', '.join(map(repr, candidates))})")
    return chosen


def split_row(line: str, delimiter: str, quotechar: str = '"') -> list[str]:
    """Split one line into fields, honouring quotes (`""` inside quotes is a literal quote)."""
    fields: list[str] = []
    current: list[str] = []
    in_quotes = False
    i = 0
    while i < len(line):
        char = line[i]
        if in_quotes:
            if char == quotechar and line[i + 1 : i + 2] == quotechar:
                current.append(quotechar)
                i += 1
            elif char == quotechar:
                in_quotes = False
            else:
                current.append(char)
        elif char == quotechar:
            in_quotes = True
        elif char == delimiter:
            fields.append("".join(current))
            current = []
        else:
            current.append(char)
        i += 1
    fields.append("".join(current))
    return fields


def _is_number(text: str) -> bool:
    try:
        float(text.replace(",", ""))
    except ValueError:
        return False
    return True


def _looks_like_header(lines: list[str], delimiter: str, quotechar: str) -> bool:
    """A header has no numeric field in a column whose other rows are all numeric."""
    if len(lines) < 2:
        return False
    rows = [split_row(line, delimiter, quotechar) for line in lines]
    header, body = rows[0], rows[1:]
    for column, name in enumerate(header):
        values = [row[column] for row in body if column < len(row) and row[column].strip()]
        if values and all(_is_number(v) for v in values) and not _is_number(name):
            return True
    return False
