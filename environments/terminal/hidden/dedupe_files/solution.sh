python3 - <<'PY'
import hashlib, os, subprocess
paths = sorted(
    (os.path.join(root, name) for root, _, names in os.walk("files") for name in names),
    key=lambda p: p.encode(),
)
seen, removed = {}, []
for path in paths:
    digest = hashlib.sha256(open(path, "rb").read()).hexdigest()
    if digest in seen:
        removed.append(path)
        os.remove(path)
    else:
        seen[digest] = path
with open("removed.txt", "w") as out:
    out.writelines(p + "\n" for p in sorted(removed, key=lambda p: p.encode()))
PY
