cat > csv2json.py <<'PY'
import csv
import json
import sys

with open(sys.argv[1], newline="") as f:
    rows = list(csv.DictReader(f))
json.dump(rows, sys.stdout)
print()
PY
# ---
python3 csv2json.py example.csv > example.json
cat example.json
