from collections import deque


class RateLimiter:
    def __init__(self, limit: int, window_s: float) -> None:
        if limit < 1:
            raise ValueError("limit must be at least 1")
        if window_s <= 0:
            raise ValueError("window_s must be positive")
        self.limit = limit
        self.window_s = window_s
        self._log: dict[str, deque] = {}
        self._last = float("-inf")

    def _advance(self, client: str, now: float) -> deque:
        if now < self._last:
            raise ValueError(f"time went backwards: {now} < {self._last}")
        self._last = now
        log = self._log.setdefault(client, deque())
        while log and log[0] <= now - self.window_s:
            log.popleft()
        return log

    def allow(self, client: str, now: float) -> bool:
        log = self._advance(client, now)
        if len(log) < self.limit:
            log.append(now)
            return True
        return False

    def remaining(self, client: str, now: float) -> int:
        return self.limit - len(self._advance(client, now))
