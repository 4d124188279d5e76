"""intervals: closed numeric intervals."""

from .ops import contains, gaps, intersect, merge, total_length

__all__ = ["contains", "gaps", "intersect", "merge", "total_length"]
