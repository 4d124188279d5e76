class _Node:
    __slots__ = ("children", "count", "end")

    def __init__(self) -> None:
        self.children: dict[str, _Node] = {}
        self.count = 0
        self.end = False


class Trie:
    def __init__(self) -> None:
        self._root = _Node()

    def _find(self, prefix: str) -> _Node | None:
        node = self._root
        for c in prefix:
            node = node.children.get(c)
            if node is None:
                return None
        return node

    def insert(self, word: str) -> None:
        if self.contains(word):
            return
        node = self._root
        node.count += 1
        for c in word:
            node = node.children.setdefault(c, _Node())
            node.count += 1
        node.end = True

    def contains(self, word: str) -> bool:
        node = self._find(word)
        return node is not None and node.end

    def starts_with(self, prefix: str) -> list[str]:
        node = self._find(prefix)
        out: list[str] = []
        if node is None:
            return out
        stack = [(node, prefix)]
        while stack:
            current, text = stack.pop()
            if current.end:
                out.append(text)
            for c, child in current.children.items():
                stack.append((child, text + c))
        return sorted(out)

    def count_prefix(self, prefix: str) -> int:
        node = self._find(prefix)
        return node.count if node is not None else 0

    def remove(self, word: str) -> bool:
        if not self.contains(word):
            return False
        node = self._root
        node.count -= 1
        for c in word:
            child = node.children[c]
            child.count -= 1
            if child.count == 0:
                del node.children[c]
                return True
            node = child
        node.end = False
        return True

    def __len__(self) -> int:
        return self._root.count
