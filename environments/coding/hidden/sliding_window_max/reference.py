from collections import deque


def sliding_window_max(nums: list[int], k: int) -> list[int]:
    if k < 1:
        raise ValueError("k must be at least 1")
    out: list[int] = []
    window: deque[int] = deque()
    for i, x in enumerate(nums):
        while window and nums[window[-1]] <= x:
            window.pop()
        window.append(i)
        if window[0] <= i - k:
            window.popleft()
        if i >= k - 1:
            out.append(nums[window[0]])
    return out
