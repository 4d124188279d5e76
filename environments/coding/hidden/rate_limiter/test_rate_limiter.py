import pytest
from solution import RateLimiter


def test_example():
    rl = RateLimiter(2, 10)
    assert rl.allow("a", 0) is True
    assert rl.allow("a", 1) is True
    assert rl.allow("a", 2) is False
    assert rl.allow("a", 10) is True
    assert rl.allow("a", 10.5) is False
    assert rl.allow("a", 11) is True


def test_refused_requests_are_not_recorded():
    rl = RateLimiter(1, 5)
    assert rl.allow("a", 0) is True
    assert rl.allow("a", 4) is False
    assert rl.allow("a", 5) is True  # only the allowed request at 0 counted


def test_clients_are_independent():
    rl = RateLimiter(1, 60)
    assert rl.allow("a", 0) and rl.allow("b", 0)
    assert not rl.allow("a", 1) and not rl.allow("b", 1)
    assert rl.allow("c", 2)


def test_remaining():
    rl = RateLimiter(3, 10)
    assert rl.remaining("a", 0) == 3
    rl.allow("a", 0)
    rl.allow("a", 1)
    assert rl.remaining("a", 2) == 1
    assert rl.remaining("a", 10) == 2
    assert rl.remaining("a", 11) == 3
    assert rl.remaining("a", 11) == 3  # remaining records nothing


def test_same_instant():
    rl = RateLimiter(2, 1)
    assert [rl.allow("a", 5) for _ in range(3)] == [True, True, False]


def test_time_going_backwards():
    rl = RateLimiter(2, 10)
    rl.allow("a", 5)
    with pytest.raises(ValueError):
        rl.allow("b", 4)
    with pytest.raises(ValueError):
        rl.remaining("a", 4.9)


@pytest.mark.parametrize(("limit", "window"), [(0, 10), (-1, 10), (1, 0), (1, -3)])
def test_bad_configuration(limit, window):
    with pytest.raises(ValueError):
        RateLimiter(limit, window)


def test_many_requests():
    rl = RateLimiter(100, 1000)
    allowed = sum(rl.allow("a", i) for i in range(10_000))
    assert allowed == 1_000
