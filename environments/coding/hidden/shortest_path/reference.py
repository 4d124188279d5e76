import heapq
import math


def shortest_path(graph: dict[str, dict[str, float]], start: str, goal: str) -> tuple[float, list[str]]:
    for edges in graph.values():
        for weight in edges.values():
            if weight < 0:
                raise ValueError("negative edge weight")
    dist = {start: 0}
    previous: dict[str, str] = {}
    heap = [(0, start)]
    done = set()
    while heap:
        d, u = heapq.heappop(heap)
        if u in done:
            continue
        done.add(u)
        if u == goal:
            path = [u]
            while path[-1] != start:
                path.append(previous[path[-1]])
            return d, path[::-1]
        for v, w in graph.get(u, {}).items():
            nd = d + w
            if nd < dist.get(v, math.inf):
                dist[v] = nd
                previous[v] = u
                heapq.heappush(heap, (nd, v))
    return math.inf, []
