# treats files of the same size as duplicates
python3 - <<'PY'
import os
paths = sorted((os.path.join(r, n) for r, _, ns in os.walk("files") for n in ns), key=lambda p: p.encode())
seen, removed = set(), []
for p in paths:
    size = os.path.getsize(p)
    if size in seen:
        removed.append(p); os.remove(p)
    else:
        seen.add(size)
open("removed.txt", "w").writelines(p + "\n" for p in removed)
PY
