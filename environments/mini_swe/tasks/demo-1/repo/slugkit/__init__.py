"""slugkit: URL slugs."""

from .slug import slugify

__all__ = ["slugify"]
