"""`Paginator`: pages over a number of items."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


class PageOutOfRange(IndexError):
    """The page number is below 1 or above the last page."""


@dataclass(frozen=True)
class Page:
    number: int
    start: int  # index of the first item on the page
    end: int  # index one past the last item
    num_pages: int

    @property
    def has_next(self) -> bool:
        return self.number < self.num_pages

    @property
    def has_previous(self) -> bool:
        return self.number > 1

    def __len__(self) -> int:
        return self.end - self.start


class Paginator:
    def __init__(self, total_items: int, per_page: int = 20) -> None:
        if total_items < 0:
            raise ValueError(f"total_items must not be negative, got {total_items}")
        if per_page < 1:
            raise ValueError(f"per_page must be at least 1, got {per_page}")
        self.total_items = total_items
        self.per_page = per_page

    @property
    def num_pages(self) -> int:
        """Number of pages; at least 1."""
        return max(1, self.total_items // self.per_page)

    def page(self, number: int) -> Page:
        """Page `number` (1-based).

        Raises:
            PageOutOfRange: no such page.
        """
        if not 1 <= number <= self.num_pages:
            raise PageOutOfRange(f"page {number} is out of range 1..{self.num_pages}")
        start = (number - 1) * self.per_page
        end = min(start + self.per_page, self.total_items)
        return Page(number, start, end, self.num_pages)

    def page_links(self, current: int, window: int = 2) -> list[int | None]:
        """Page numbers to link from page `current`: the first, the last, and `window` pages
        either side of `current`; `None` marks a gap."""
        last = self.num_pages
        wanted = {1, last, *range(current - window, current + window + 1)}
        numbers = sorted(n for n in wanted if 1 <= n <= last)
        links: list[int | None] = []
        for n in numbers:
            if links and n - links[-1] > 1:  # type: ignore[operator]
                links.append(None)
            links.append(n)
        return links


def paginate(items: Sequence[T], page: int, per_page: int = 20) -> list[T]:
    """The items on page `page`."""
    p = Paginator(len(items), per_page).page(page)
    return list(items[p.start : p.end])
