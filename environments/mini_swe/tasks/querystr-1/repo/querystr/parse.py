"""Parsing query strings."""

from __future__ import annotations

from urllib.parse import unquote


def parse_query(query: str) -> dict[str, list[str]]:
    """Every key's values in order; a leading `?` is ignored, `+` is read as a space."""
    result: dict[str, list[str]] = {}
    for pair in query.lstrip("?").split("&"):
        if not pair:
            continue
        key, _, value = pair.partition("=")
        result.setdefault(unquote(key.replace("+", " ")), []).append(unquote(value.replace("+", " ")))
    return result
