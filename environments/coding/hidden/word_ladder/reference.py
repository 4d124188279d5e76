from collections import deque


def ladder_length(begin: str, end: str, words: list[str]) -> int:
    if begin == end:
        return 1
    usable = {w for w in words if len(w) == len(begin)}
    if end not in usable:
        return 0
    letters = sorted({c for w in usable for c in w})
    seen = {begin}
    queue = deque([(begin, 1)])
    while queue:
        word, length = queue.popleft()
        for i in range(len(word)):
            for c in letters:
                if c == word[i]:
                    continue
                candidate = word[:i] + c + word[i + 1 :]
                if candidate in usable and candidate not in seen:
                    if candidate == end:
                        return length + 1
                    seen.add(candidate)
                    queue.append((candidate, length + 1))
    return 0
