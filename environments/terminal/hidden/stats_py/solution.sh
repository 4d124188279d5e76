cat > stats.py <<'PY'
import sys

numbers = [float(line) for line in sys.stdin if line.strip()]
if not numbers:
    print("count=0")
else:
    print(f"count={len(numbers)} min={min(numbers):.2f} max={max(numbers):.2f} mean={sum(numbers) / len(numbers):.2f}")
PY
# ---
python3 stats.py < numbers.txt
