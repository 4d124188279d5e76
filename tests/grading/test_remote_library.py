"""Remote grading of a library (a package), as repository tasks need it: submodules, dates,
callbacks, exception attributes, value classes with methods, equality of the library's objects.
Real worker processes, no mocks."""

from __future__ import annotations

import datetime
import decimal
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from openenv_sdk.grading import ChannelError, RemoteError, RemoteSession, WorkerDied, install_remote_modules
from openenv_sdk.grading._codec import Codec, CodecError, Limits

PACKAGE = {
    "__init__.py": """
        from .core import Config, LRU, ParseError, Version, add_days, memoize, parse, twice, apply_all
        from . import core
    """,
    "core.py": """
        import datetime

        class ParseError(ValueError):
            def __init__(self, message, lineno):
                super().__init__(f"line {lineno}: {message}")
                self.lineno = lineno

        class Config(dict):
            def get(self, section, key=None, default=None):
                if key is None:
                    return super().get(section, default)
                return super().get(section, {}).get(key, default)

            def getint(self, section, key):
                return int(self.get(section, key))

            def set(self, section, key, value):
                self.setdefault(section, {})[key] = value

        def parse(text):
            config = Config()
            for lineno, line in enumerate(text.splitlines(), start=1):
                if "=" not in line:
                    raise ParseError("no '='", lineno)
                key, value = line.split("=", 1)
                config.setdefault("main", {})[key.strip()] = value.strip()
            return config

        class Version:
            def __init__(self, text):
                self.core = text.split("+")[0]
            def __eq__(self, other):
                return isinstance(other, Version) and self.core == other.core
            def __hash__(self):
                return hash(self.core)
            def __lt__(self, other):
                return self.core < other.core

        class LRU:
            def __init__(self, capacity, on_evict=None):
                self.capacity, self.on_evict, self.data = capacity, on_evict, []
            def put(self, key):
                self.data.append(key)
                while len(self.data) > self.capacity:
                    gone = self.data.pop(0)
                    if self.on_evict is not None:
                        self.on_evict(gone, len(self.data))

        def memoize(fn):
            cache = {}
            def wrapper(x):
                if x not in cache:
                    cache[x] = fn(x)
                return cache[x]
            return wrapper

        def add_days(day, n):
            return day + datetime.timedelta(days=n)

        def twice(fn, x):
            return fn(fn(x))

        def apply_all(fn, items, kind=int):
            return [fn(kind(item)) for item in items]
    """,
    "sub/__init__.py": "",
    "sub/tools.py": """
        def shout(text):
            return text.upper() + "!"
    """,
}


@pytest.fixture
def library(tmp_path: Path) -> Iterator[RemoteSession]:
    for name, text in PACKAGE.items():
        path = tmp_path / "libpkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    with install_remote_modules(["libpkg"], tmp_path, timeout_s=10.0, remote_equality=True) as session:
        yield session
    assert not [m for m in sys.modules if m == "libpkg" or m.startswith("libpkg.")]  # submodules too


def test_dates_times_and_decimals_cross_exactly() -> None:
    values = [
        datetime.date(2000, 2, 29),
        datetime.datetime(2024, 5, 1, 8, 30, 15, 7),
        datetime.datetime(2024, 5, 1, 8, 30, tzinfo=datetime.timezone(datetime.timedelta(hours=2))),
        datetime.time(23, 59, 1),
        datetime.timedelta(days=-3, seconds=5, microseconds=9),
        decimal.Decimal("-1.50"),
    ]
    codec = Codec(Limits(), lambda v, d: None, lambda n, d: None)
    for value in values:
        back = codec.decode(codec.encode(value))
        assert back == value and type(back) is type(value)
    assert str(codec.decode(codec.encode(decimal.Decimal("1.50")))) == "1.50"  # the exact text
    for bad in ({"$": "date", "v": "2024-13-01"}, {"$": "td", "v": [1, 2]}, {"$": "dec", "v": "x" * 5000}):
        with pytest.raises(CodecError):
            codec.decode(bad)


def test_submodules_and_dates(library: RemoteSession) -> None:
    import libpkg.sub.tools
    from libpkg import add_days
    from libpkg.sub.tools import shout

    assert add_days(datetime.date(2000, 2, 28), 1) == datetime.date(2000, 2, 29)
    assert shout("hi") == "HI!" and libpkg.sub.tools.shout("a") == "A!"
    with pytest.raises(ModuleNotFoundError):
        import libpkg.nothing


def test_callbacks_run_here_with_the_solutions_arguments(library: RemoteSession) -> None:
    from libpkg import LRU, apply_all, memoize, twice

    evicted: list[tuple[str, int]] = []
    cache = LRU(1, on_evict=lambda key, size: evicted.append((key, size)))
    cache.put("a")
    cache.put("b")
    assert evicted == [("a", 1)]

    calls = []

    @memoize
    def square(x: int) -> int:
        calls.append(x)
        return x * x

    assert square(3) == 9 and square(3) == 9 and calls == [3]
    assert twice(lambda x: x + 1, 1) == 3
    assert twice(str.upper, "a") == "A"  # a builtin goes by name: the worker's own
    assert apply_all(abs, ["-2", "3"]) == [2, 3]
    assert apply_all(lambda x: x * 2, ["1"], kind=float) == [2.0]
    # a callback that calls the solution in turn (served by the worker while it waits)
    assert twice(lambda x: square(x), 2) == 16


def test_a_callbacks_exception_reaches_the_test_as_itself(library: RemoteSession) -> None:
    from libpkg import twice

    class Mine(Exception):
        pass

    def fails(x: int) -> int:
        raise Mine("from the test")

    with pytest.raises(Mine, match="from the test"):
        twice(fails, 1)
    with pytest.raises(pytest.fail.Exception):  # a BaseException ends the worker and goes on up
        twice(lambda x: pytest.fail("stop"), 1)
    assert twice(lambda x: x * 3, 1) == 9  # a fresh worker


def test_exception_attributes_and_classes(library: RemoteSession) -> None:
    from libpkg import ParseError, parse

    with pytest.raises(ParseError) as info:
        parse("a = 1\nbroken")
    assert info.value.lineno == 2 and str(info.value) == "line 2: no '='"
    assert isinstance(info.value, ValueError) and isinstance(info.value, RemoteError)


def test_a_dict_subclass_keeps_its_methods_and_compares_as_a_dict(library: RemoteSession) -> None:
    from libpkg import Config, parse

    cfg = parse("a = 1\nb = two")
    assert cfg == {"main": {"a": "1", "b": "two"}} and type(cfg).__name__ == "Config"
    assert cfg.get("main", "a") == "1" and cfg.getint("main", "a") == 1  # the solution's get, not dict.get
    assert set(cfg) == {"main"} and isinstance(cfg, dict)
    cfg.set("extra", "k", "v")  # a method that changes it: the local copy follows
    assert cfg["extra"] == {"k": "v"} and cfg.get("extra", "k") == "v"
    assert isinstance(cfg, Config) and not isinstance({}, Config)


def test_equality_of_the_solutions_objects_when_asked_for(library: RemoteSession, tmp_path: Path) -> None:
    from libpkg import Version

    a, b, c = Version("1.0.0+a"), Version("1.0.0+b"), Version("1.0.1")
    assert a == b and a != c and len({a, b, c}) == 2
    assert sorted([c, a])[0] is a
    assert not (a == "1.0.0") and a != "1.0.0"  # never against a local value


def test_equality_stays_identity_by_default(tmp_path: Path) -> None:
    (tmp_path / "solution.py").write_text(
        "class Liar:\n    def __eq__(self, o):\n        return True\n    __hash__ = object.__hash__\n"
        "def make():\n    return Liar()\n",
        encoding="utf-8",
    )
    with install_remote_modules(["solution"], tmp_path) as session:
        from solution import make

        assert not session.remote_equality and make() != make()
    assert "solution" not in sys.modules


def test_a_callback_request_for_an_unknown_callable_ends_the_worker(tmp_path: Path) -> None:
    """A worker that forges a callback request (a callable it was never given) gets nothing run."""
    (tmp_path / "solution.py").write_text("def forge():\n    return 1\n", encoding="utf-8")
    from openenv_sdk.grading import ProtocolError

    session = RemoteSession(["solution"], tmp_path)
    with session:
        channel = session._ensure()
        reply = channel.exchange(b'{"id": 1, "op": "get", "ref": {"$": "p", "p": ["solution"]}, "name": "forge"}\n', 10)
        assert reply.startswith(b'{"id":1')
        with pytest.raises(ProtocolError, match="unknown callable"):
            session._call_back(b'{"cb":99,"call":1,"args":[],"kwargs":[]}', session.generation)
    assert issubclass(WorkerDied, ChannelError)


def test_a_calls_limit_counts_the_workers_time_not_the_callbacks(tmp_path: Path) -> None:
    (tmp_path / "solution.py").write_text(
        "def twice(fn, x):\n    return fn(fn(x))\n"
        "def spin(fn):\n    while True:\n        fn()\n",
        encoding="utf-8",
    )
    import time

    from openenv_sdk.grading import RemoteTimeout

    with install_remote_modules(["solution"], tmp_path, timeout_s=1.0) as session:
        from solution import spin, twice

        assert twice(lambda x: time.sleep(0.6) or x + 1, 1) == 3  # 1.2 s of callbacks: not the worker's
        calls = []
        started = time.monotonic()
        with pytest.raises(RemoteTimeout):  # a worker that only calls back is still cut at its limit
            spin(lambda: calls.append(1))
        assert time.monotonic() - started < 5 and len(calls) > 10
        assert twice(lambda x: x * 2, 1) == 4 and session.generation == 2
