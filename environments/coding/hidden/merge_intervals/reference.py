def merge_intervals(intervals) -> list[tuple[int, int]]:
    pairs = []
    for start, end in intervals:
        if start > end:
            raise ValueError(f"interval ({start}, {end}) has start > end")
        pairs.append((start, end))
    pairs.sort()
    merged: list[tuple[int, int]] = []
    for start, end in pairs:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged
