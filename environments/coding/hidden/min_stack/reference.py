class MinStack:
    def __init__(self) -> None:
        self._items: list = []
        self._mins: list = []

    def push(self, x) -> None:
        self._items.append(x)
        self._mins.append(x if not self._mins or x < self._mins[-1] else self._mins[-1])

    def pop(self):
        if not self._items:
            raise IndexError("pop from an empty stack")
        self._mins.pop()
        return self._items.pop()

    def top(self):
        if not self._items:
            raise IndexError("top of an empty stack")
        return self._items[-1]

    def get_min(self):
        if not self._mins:
            raise IndexError("minimum of an empty stack")
        return self._mins[-1]

    def __len__(self) -> int:
        return len(self._items)
