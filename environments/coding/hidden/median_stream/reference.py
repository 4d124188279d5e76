import heapq


class MedianFinder:
    def __init__(self) -> None:
        self._low: list = []  # max-heap (negated) of the smaller half
        self._high: list = []  # min-heap of the larger half

    def add(self, x) -> None:
        if self._low and x > -self._low[0]:
            heapq.heappush(self._high, x)
        else:
            heapq.heappush(self._low, -x)
        if len(self._low) > len(self._high) + 1:
            heapq.heappush(self._high, -heapq.heappop(self._low))
        elif len(self._high) > len(self._low):
            heapq.heappush(self._low, -heapq.heappop(self._high))

    def median(self) -> float:
        if not self._low:
            raise ValueError("no numbers added")
        if len(self._low) > len(self._high):
            return float(-self._low[0])
        return (-self._low[0] + self._high[0]) / 2

    def __len__(self) -> int:
        return len(self._low) + len(self._high)
