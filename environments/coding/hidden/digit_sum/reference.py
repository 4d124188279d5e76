def digit_sum(n: int) -> int:
    return sum(int(d) for d in str(abs(n)))
