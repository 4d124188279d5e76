"""`memoize`: cache a function's results in an `LRUCache`."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from .cache import LRUCache

F = TypeVar("F", bound=Callable[..., Any])
_MISSING = object()


def memoize(maxsize: int = 128) -> Callable[[F], F]:
    """Cache results by positional and keyword arguments (which must be hashable)."""

    def decorate(fn: F) -> F:
        cache = LRUCache(maxsize)

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            key = (args, tuple(sorted(kwargs.items())))
            value = cache.get(key, _MISSING)
            if value is _MISSING:
                value = fn(*args, **kwargs)
                cache.put(key, value)
            return value

        wrapper.cache = cache  # type: ignore[attr-defined]
        return wrapper  # type: ignore[return-value]

    return decorate
