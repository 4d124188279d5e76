#!/bin/bash
set -e
cat > /app/fib.py <<'PY'
import sys


def fib(n):
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


if __name__ == "__main__":
    sys.set_int_max_str_digits(0)
    n = int(sys.argv[1])
    if n < 0:
        print("fib: N must be 0 or more", file=sys.stderr)
        sys.exit(2)
    print(fib(n))
PY
