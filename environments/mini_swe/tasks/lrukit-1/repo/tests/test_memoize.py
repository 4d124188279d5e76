from lrukit import memoize


def test_memoize_caches_results():
    calls = []

    @memoize(maxsize=2)
    def square(x):
        calls.append(x)
        return x * x

    assert square(3) == 9
    assert square(3) == 9
    assert calls == [3]


def test_memoize_is_bounded():
    calls = []

    @memoize(maxsize=1)
    def ident(x):
        calls.append(x)
        return x

    ident(1)
    ident(2)
    ident(1)
    assert calls == [1, 2, 1]


def test_memoize_keyword_arguments():
    @memoize()
    def join(a, sep="-"):
        return f"{a}{sep}"

    assert join("x", sep="+") == "x+"
    assert join("x") == "x-"
