"""`LRUCache`: a bounded mapping that evicts the least recently used entry."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any


class LRUCache:
    """A mapping of at most `capacity` entries.

    `get` and `put` make a key the most recently used; when a `put` adds a key beyond
    `capacity`, the least recently used entry is evicted (and `on_evict(key, value)` called).
    """

    def __init__(self, capacity: int, *, on_evict: Callable[[Hashable, Any], None] | None = None) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self.capacity = capacity
        self.on_evict = on_evict
        self.hits = 0
        self.misses = 0
        self._data: OrderedDict[Hashable, Any] = OrderedDict()

    def get(self, key: Hashable, default: Any = None) -> Any:
        """The value for `key` (making it the most recently used), or `default`."""
        if key in self._data:
            self._data.move_to_end(key)
            self.hits += 1
            return self._data[key]
        self.misses += 1
        return default

    def peek(self, key: Hashable, default: Any = None) -> Any:
        """The value for `key` without touching its recency or the statistics."""
        return self._data.get(key, default)

    def put(self, key: Hashable, value: Any) -> None:
        """Store `value` under `key`, making it the most recently used."""
        if key in self._data:
            self._data[key] = value
            return
        self._data[key] = value
        self._evict_overflow()

    def pop(self, key: Hashable, default: Any = None) -> Any:
        """Remove `key` and return its value (no eviction callback)."""
        return self._data.pop(key, default)

    def resize(self, capacity: int) -> None:
        """Change the capacity, evicting least recently used entries if it shrinks."""
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self.capacity = capacity
        self._evict_overflow()

    def clear(self) -> None:
        self._data.clear()

    def keys(self) -> list[Hashable]:
        """Keys from least to most recently used."""
        return list(self._data)

    def _evict_overflow(self) -> None:
        while len(self._data) > self.capacity:
            key, value = self._data.popitem(last=False)
            if self.on_evict is not None:
                self.on_evict(key, value)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"LRUCache(capacity={self.capacity}, size={len(self)})"
