def rle_encode(text: str) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    for c in text:
        if out and out[-1][0] == c:
            out[-1] = (c, out[-1][1] + 1)
        else:
            out.append((c, 1))
    return out


def rle_decode(pairs: list[tuple[str, int]]) -> str:
    return "".join(c * n for c, n in pairs)
