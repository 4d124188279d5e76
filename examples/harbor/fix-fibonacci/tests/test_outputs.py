"""Checks of /app/fib.py, run after the agent."""

import subprocess
import time

FIB = "/app/fib.py"


def run(*args):
    return subprocess.run(["python3", FIB, *args], capture_output=True, text=True, timeout=10)


def reference(n):
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


def test_small_values():
    for n in range(0, 30):
        result = run(str(n))
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == str(reference(n)), n


def test_large_value_is_fast():
    started = time.monotonic()
    result = run("10000")
    assert time.monotonic() - started < 1.0
    assert result.stdout.strip() == str(reference(10000))


def test_negative_is_an_error():
    result = run("-3")
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.strip() != ""
