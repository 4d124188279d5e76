"""lrukit: a least-recently-used cache."""

from .cache import LRUCache
from .memoize import memoize

__all__ = ["LRUCache", "memoize"]
