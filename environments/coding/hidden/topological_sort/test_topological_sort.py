import pytest
from solution import CycleError, topological_sort


@pytest.mark.parametrize(
    ("deps", "order"),
    [
        ({"b": ["a"], "c": ["b"]}, ["a", "b", "c"]),
        ({}, []),
        ({"a": []}, ["a"]),
        ({"c": [], "b": [], "a": []}, ["a", "b", "c"]),
        ({"d": ["b", "c"], "b": ["a"], "c": ["a"]}, ["a", "b", "c", "d"]),
        ({"x": ["y"]}, ["y", "x"]),
        ({"z": [], "a": ["z"], "m": []}, ["m", "z", "a"]),
        ({"b": ["a", "a"]}, ["a", "b"]),
        (
            {"app": ["lib", "util"], "lib": ["util"], "test": ["app"], "docs": []},
            ["docs", "util", "lib", "app", "test"],
        ),
    ],
)
def test_order(deps, order):
    assert topological_sort(deps) == order


@pytest.mark.parametrize(
    "deps",
    [
        {"a": ["b"], "b": ["a"]},
        {"a": ["a"]},
        {"a": [], "b": ["c"], "c": ["d"], "d": ["b"]},
        {"x": ["y"], "y": ["z"], "z": ["x"], "w": []},
    ],
)
def test_cycles(deps):
    with pytest.raises(CycleError):
        topological_sort(deps)
    with pytest.raises(ValueError):  # CycleError is a ValueError
        topological_sort(deps)


def test_long_chain():
    n = 20_000
    names = [f"t{i:05d}" for i in range(n)]
    deps = {names[i]: [names[i - 1]] for i in range(1, n)}
    assert topological_sort(deps) == names


def test_every_dependency_comes_first():
    deps = {f"n{i}": [f"n{j}" for j in range(i) if (i * 7 + j) % 5 == 0] for i in range(60)}
    order = topological_sort(deps)
    position = {name: k for k, name in enumerate(order)}
    assert sorted(order) == sorted(deps)
    assert all(position[d] < position[t] for t, ds in deps.items() for d in ds)
