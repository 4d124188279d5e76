def two_sum(nums: list[int], target: int) -> tuple[int, int] | None:
    first: dict[int, int] = {}
    for j, x in enumerate(nums):
        i = first.get(target - x)
        if i is not None:
            return (i, j)
        first.setdefault(x, j)
    return None
