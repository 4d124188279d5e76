def _compile(pattern: str) -> list[tuple[str | None, str]]:
    """Elements as (character or None for '.', quantifier '' / '*' / '+' / '?')."""
    elements: list[tuple[str | None, str]] = []
    i = 0
    quantifiable = False
    while i < len(pattern):
        c = pattern[i]
        if c in "*+?":
            if not quantifiable:
                raise ValueError(f"nothing to repeat at position {i}")
            elements[-1] = (elements[-1][0], c)
            quantifiable = False
            i += 1
            continue
        if c == "\\":
            if i + 1 >= len(pattern):
                raise ValueError("trailing backslash")
            elements.append((pattern[i + 1], ""))
            i += 2
        elif c == ".":
            elements.append((None, ""))
            i += 1
        else:
            elements.append((c, ""))
            i += 1
        quantifiable = True
    return elements


def full_match(pattern: str, text: str) -> bool:
    elements = _compile(pattern)
    n = len(text)
    # states: set of text positions reachable after matching a prefix of the elements
    positions = {0}
    for char, quantifier in elements:

        def ok(p: int, char: str | None = char) -> bool:
            return p < n and (char is None or text[p] == char)

        nxt: set[int] = set()
        if quantifier == "":
            nxt = {p + 1 for p in positions if ok(p)}
        elif quantifier == "?":
            nxt = set(positions) | {p + 1 for p in positions if ok(p)}
        else:
            frontier = {p + 1 for p in positions if ok(p)}
            reached = set(frontier)
            while frontier:
                frontier = {p + 1 for p in frontier if ok(p)} - reached
                reached |= frontier
            nxt = reached | (set(positions) if quantifier == "*" else set())
        positions = nxt
        if not positions:
            return False
    return n in positions
