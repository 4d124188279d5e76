import pytest

from pagekit import Paginator, paginate


@pytest.mark.parametrize(("total", "per_page", "pages"), [(25, 10, 3), (11, 10, 2), (101, 20, 6), (21, 20, 2), (7, 3, 3)])
def test_partial_last_page_counts(total, per_page, pages):
    assert Paginator(total, per_page).num_pages == pages


def test_partial_last_page_contents():
    assert paginate(list(range(25)), page=3, per_page=10) == [20, 21, 22, 23, 24]
    page = Paginator(25, 10).page(3)
    assert (page.start, page.end, len(page)) == (20, 25, 5)
    assert not page.has_next
    assert Paginator(25, 10).page(2).has_next


def test_page_links_include_partial_last_page():
    assert Paginator(45, 10).page_links(1, window=1) == [1, 2, None, 5]
