"""The one "Did you mean ...?" hint, for every lookup by a name someone typed."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["did_you_mean"]


def did_you_mean(name: object, options: Iterable[object], *, prefix: str = "") -> str:
    """`" Did you mean 'x'?"` for the closest of `options` to `name`, or `""` when none is close.

    `prefix` goes before the suggestion (a manifest key's section, `resources.`).
    """
    close = difflib.get_close_matches(str(name), [str(o) for o in options], n=1)
    return f" Did you mean {prefix + close[0]!r}?" if close else ""
