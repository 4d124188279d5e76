"""pagekit: pagination arithmetic."""

from .paginator import Page, PageOutOfRange, Paginator, paginate

__all__ = ["Page", "PageOutOfRange", "Paginator", "paginate"]
