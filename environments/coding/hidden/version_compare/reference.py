def _parts(version: str) -> list[int]:
    parts = version.split(".")
    if any(not p or any(c not in "0123456789" for c in p) for p in parts):
        raise ValueError(f"not a version: {version!r}")
    numbers = [int(p) for p in parts]
    while numbers and numbers[-1] == 0:
        numbers.pop()
    return numbers


def compare_versions(a: str, b: str) -> int:
    pa, pb = _parts(a), _parts(b)
    return (pa > pb) - (pa < pb)
