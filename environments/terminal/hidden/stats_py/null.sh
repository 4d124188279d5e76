# chokes on blank lines and prints no decimals
cat > stats.py <<'PY'
import sys
numbers = [int(line) for line in sys.stdin]
print(f"count={len(numbers)} min={min(numbers)} max={max(numbers)} mean={sum(numbers) // len(numbers)}")
PY
