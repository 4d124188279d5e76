"""Building query strings and URLs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote


def encode_value(value: Any) -> str:
    """A parameter value as text: booleans are `true`/`false`, the rest `str()`."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def build_query(params: Mapping[str, Any] | None = None, *, sort: bool = False, **extra: Any) -> str:
    """`key=value` pairs joined by `&`, percent-encoded (spaces as `%20`).

    `None` values are skipped; a list or tuple value repeats the key once per item.
    """
    items = list((params or {}).items()) + list(extra.items())
    if sort:
        items.sort(key=lambda item: item[0])
    pairs = []
    for key, value in items:
        values = value if isinstance(value, list | tuple) else [value]
        for item in values:
            if item is None:
                continue
            pairs.append(f"{quote(str(key), safe='')}={quote(encode_value(item), safe='')}")
    return "&".join(pairs)


def build_url(base: str, params: Mapping[str, Any] | None = None, **extra: Any) -> str:
    """`base` with the query of `params` added (after any query it already has)."""
    query = build_query(params, **extra)
    if not query:
        return base
    if base.endswith(("?", "&")):
        separator = ""
    elif "?" in base:
        separator = "&"
    else:
        separator = "?"
    return f"{base}{separator}{query}"
