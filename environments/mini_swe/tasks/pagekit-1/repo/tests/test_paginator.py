import pytest

from pagekit import PageOutOfRange, Paginator, paginate


def test_num_pages_exact_multiple():
    assert Paginator(100, 20).num_pages == 5
    assert Paginator(30, 10).num_pages == 3


def test_empty_has_one_page():
    p = Paginator(0, 10)
    assert p.num_pages == 1
    page = p.page(1)
    assert (page.start, page.end, len(page)) == (0, 0, 0)
    assert not page.has_next and not page.has_previous


def test_page_bounds():
    page = Paginator(100, 20).page(2)
    assert (page.start, page.end) == (20, 40)
    assert page.has_next and page.has_previous
    assert len(page) == 20


def test_last_page():
    page = Paginator(100, 20).page(5)
    assert (page.start, page.end) == (80, 100)
    assert not page.has_next


@pytest.mark.parametrize("number", [0, -1, 6])
def test_out_of_range(number):
    with pytest.raises(PageOutOfRange):
        Paginator(100, 20).page(number)


@pytest.mark.parametrize(("total", "per_page"), [(-1, 10), (10, 0)])
def test_invalid_arguments(total, per_page):
    with pytest.raises(ValueError):
        Paginator(total, per_page)


def test_page_links():
    p = Paginator(200, 20)
    assert p.page_links(1) == [1, 2, 3, None, 10]
    assert p.page_links(5) == [1, None, 3, 4, 5, 6, 7, None, 10]
    assert p.page_links(10, window=1) == [1, None, 9, 10]


def test_page_links_single_page():
    assert Paginator(5, 20).page_links(1) == [1]


def test_paginate():
    items = list(range(40))
    assert paginate(items, 1, 20) == list(range(20))
    assert paginate(items, 2, 20) == list(range(20, 40))
    assert paginate([], 1) == []
