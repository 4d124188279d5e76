"""Matching versions against ranges such as `>=1.2.0, <2.0.0` or `^1.4.0`."""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Iterable

from .version import Version

_COMPARATOR = re.compile(r"^(>=|<=|>|<|=|\^|~)?\s*(.+)$")
_OPS: dict[str, Callable[[Version, Version], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    ">": operator.gt,
    "<": operator.lt,
    "=": operator.eq,
}


def _expand(op: str, bound: Version) -> list[tuple[Callable[[Version, Version], bool], Version]]:
    if op == "^":
        if bound.major > 0:
            upper = Version(bound.major + 1, 0, 0)
        else:
            upper = Version(0, bound.minor + 1, 0)
        return [(operator.ge, bound), (operator.lt, upper)]
    if op == "~":
        return [(operator.ge, bound), (operator.lt, Version(bound.major, bound.minor + 1, 0))]
    return [(_OPS[op], bound)]


def _parse_range(spec: str) -> list[tuple[Callable[[Version, Version], bool], Version]]:
    checks = []
    for part in spec.split(","):
        part = part.strip()
        match = _COMPARATOR.match(part)
        if not part or match is None:
            raise ValueError(f"bad range {spec!r}")
        op, text = match.groups()
        checks.extend(_expand(op or "=", Version.parse(text)))
    return checks


def satisfies(version: str | Version, spec: str) -> bool:
    """Whether `version` meets every comparator of `spec`."""
    v = version if isinstance(version, Version) else Version.parse(version)
    return all(check(v, bound) for check, bound in _parse_range(spec))


def max_satisfying(versions: Iterable[str], spec: str) -> str | None:
    """The highest of `versions` that satisfies `spec` (as given), or None."""
    matching = [(Version.parse(v), v) for v in versions if satisfies(v, spec)]
    if not matching:
        return None
    return max(matching, key=lambda pair: pair[0])[1]
