import math
import random

import pytest
from solution import shortest_path

GRAPH = {"a": {"b": 1, "c": 4}, "b": {"c": 2, "d": 5}, "c": {"d": 1}}


def _path_cost(graph, path):
    return sum(graph[u][v] for u, v in zip(path, path[1:]))


def test_example():
    distance, path = shortest_path(GRAPH, "a", "d")
    assert distance == 4 and path == ["a", "b", "c", "d"]


def test_same_node():
    assert tuple(shortest_path(GRAPH, "b", "b")) == (0, ["b"])
    assert tuple(shortest_path({}, "x", "x")) == (0, ["x"])


def test_unreachable():
    assert tuple(shortest_path(GRAPH, "d", "a")) == (math.inf, [])
    assert tuple(shortest_path(GRAPH, "a", "nowhere")) == (math.inf, [])
    assert tuple(shortest_path({}, "x", "y")) == (math.inf, [])


def test_target_only_nodes_and_zero_weights():
    graph = {"s": {"t": 0, "u": 3}, "t": {"u": 0}}
    distance, path = shortest_path(graph, "s", "u")
    assert distance == 0 and path == ["s", "t", "u"]


def test_directed_edges():
    graph = {"a": {"b": 1}, "b": {}}
    assert tuple(shortest_path(graph, "b", "a")) == (math.inf, [])


def test_negative_weight():
    with pytest.raises(ValueError):
        shortest_path({"a": {"b": -1}}, "a", "b")


def test_float_weights():
    graph = {"a": {"b": 0.5, "c": 2.0}, "b": {"c": 0.25}}
    distance, path = shortest_path(graph, "a", "c")
    assert distance == pytest.approx(0.75) and path == ["a", "b", "c"]


def test_random_graphs_against_bellman_ford():
    rng = random.Random(42)
    for _ in range(20):
        nodes = [f"n{i}" for i in range(25)]
        graph = {u: {v: rng.randint(0, 20) for v in rng.sample(nodes, 4) if v != u} for u in nodes}
        dist = {u: math.inf for u in nodes}
        dist["n0"] = 0
        for _ in range(len(nodes)):
            for u, edges in graph.items():
                for v, w in edges.items():
                    dist[v] = min(dist[v], dist[u] + w)
        for goal in nodes:
            distance, path = shortest_path(graph, "n0", goal)
            assert distance == dist[goal]
            if dist[goal] < math.inf:
                assert path[0] == "n0" and path[-1] == goal and _path_cost(graph, path) == distance
            else:
                assert path == []


def test_large_grid():
    n = 120
    graph = {}
    for r in range(n):
        for c in range(n):
            edges = {}
            if r + 1 < n:
                edges[f"{r + 1},{c}"] = 1
            if c + 1 < n:
                edges[f"{r},{c + 1}"] = 2
            graph[f"{r},{c}"] = edges
    distance, path = shortest_path(graph, "0,0", f"{n - 1},{n - 1}")
    assert distance == 3 * (n - 1) and len(path) == 2 * n - 1
