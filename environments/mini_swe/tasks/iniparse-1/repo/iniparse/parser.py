"""Parse INI text into a `Config` (section name -> {key: value})."""

from __future__ import annotations

COMMENT_PREFIXES = ("#", ";")
INLINE_COMMENT_MARKERS = (" ;", " #", "\t;", "\t#")
DELIMITERS = ("=", ":")
_TRUE = {"1", "yes", "true", "on"}
_FALSE = {"0", "no", "false", "off"}


class ParseError(ValueError):
    """The text is not valid INI; `lineno` is the 1-based line of the problem."""

    def __init__(self, message: str, lineno: int) -> None:
        super().__init__(f"line {lineno}: {message}")
        self.lineno = lineno


class Config(dict):
    """Sections by name, each a dict of lower-case keys to string values."""

    def get(self, section: str, key: str | None = None, default: str | None = None):  # type: ignore[override]
        """`get(section)` is the section's dict; `get(section, key)` one value (or `default`)."""
        if key is None:
            return super().get(section, default)
        return super().get(section, {}).get(key.lower(), default)

    def getint(self, section: str, key: str, default: int | None = None) -> int | None:
        value = self.get(section, key)
        return default if value is None else int(value)

    def getbool(self, section: str, key: str, default: bool | None = None) -> bool | None:
        value = self.get(section, key)
        if value is None:
            return default
        lowered = value.lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        raise ValueError(f"[{section}] {key}: not a boolean: {value!r}")


def parse(text: str, *, default_section: str = "DEFAULT") -> Config:
    """Parse INI text.

    Raises:
        ParseError: a malformed section header, or a line that is not `key = value`.
    """
    config = Config()
    current: dict[str, str] | None = None
    last_key: str | None = None
    for lineno, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not stripped or stripped.startswith(COMMENT_PREFIXES):
            continue
        if raw[:1].isspace() and current is not None and last_key is not None:
            current[last_key] += "\n" + _strip_inline_comment(stripped)
            continue
        if stripped.startswith("["):
            if not stripped.endswith("]"):
                raise ParseError(f"unterminated section header {stripped!r}", lineno)
            name = stripped[1:-1].strip()
            if not name:
                raise ParseError("empty section name", lineno)
            current = config.setdefault(name, {})
            last_key = None
            continue
        key, value = _split_option(stripped, lineno)
        if current is None:
            current = config.setdefault(default_section, {})
        current[key] = value
        last_key = key
    return config


def _split_option(line: str, lineno: int) -> tuple[str, str]:
    """`key = value` or `key: value` -> (lower-case key, value without inline comment)."""
    positions = [line.rfind(d) for d in DELIMITERS]
    positions = [p for p in positions if p >= 0]
    if not positions:
        raise ParseError(f"expected 'key = value', got {line!r}", lineno)
    split_at = min(positions)
    key = line[:split_at].strip()
    value = line[split_at + 1 :].strip()
    if not key:
        raise ParseError(f"missing key in {line!r}", lineno)
    return key.lower(), _strip_inline_comment(value)


def _strip_inline_comment(value: str) -> str:
    cut = len(value)
    for marker in INLINE_COMMENT_MARKERS:
        index = value.find(marker)
        if index != -1:
            cut = min(cut, index)
    return value[:cut].rstrip()
