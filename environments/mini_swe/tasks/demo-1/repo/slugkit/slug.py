"""Turning titles into URL slugs."""

from __future__ import annotations

import re
import unicodedata


def slugify(text: str, *, separator: str = "-", max_length: int | None = None) -> str:
    """Lower-case ASCII words joined by `separator`, e.g. `slugify("Hello World")` is `hello-world`.

    Accents are dropped, anything else that is not a letter or digit separates words, and a
    slug never starts or ends with the separator. `max_length` cuts it (at most that many
    characters, without a trailing separator).
    """
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^a-z0-9]+", separator, ascii_text.lower()).lstrip(separator)
    if max_length is not None:
        slug = slug[:max_length].rstrip(separator)
    return slug
