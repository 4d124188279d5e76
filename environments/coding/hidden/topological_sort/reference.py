import heapq


class CycleError(ValueError):
    """The dependencies contain a cycle."""


def topological_sort(deps: dict[str, list[str]]) -> list[str]:
    prerequisites: dict[str, set[str]] = {}
    dependents: dict[str, set[str]] = {}
    for task, needs in deps.items():
        prerequisites.setdefault(task, set()).update(needs)
        dependents.setdefault(task, set())
        for need in needs:
            prerequisites.setdefault(need, set())
            dependents.setdefault(need, set()).add(task)
    remaining = {task: len(needs) for task, needs in prerequisites.items()}
    ready = [task for task, count in remaining.items() if count == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        task = heapq.heappop(ready)
        order.append(task)
        for dependent in dependents[task]:
            remaining[dependent] -= 1
            if remaining[dependent] == 0:
                heapq.heappush(ready, dependent)
    if len(order) != len(prerequisites):
        raise CycleError("the dependencies contain a cycle")
    return order
