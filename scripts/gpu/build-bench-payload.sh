#!/bin/bash
# Build the payload that runs the CPU server benchmarks (benchmarks/bench_echo.py: the churn
# workload and the WS floor, ours beside OpenEnv's) on the lent GPU machine, whose 16 quiet cores
# make figures that a shared 2-core machine cannot. Run here, from the repository root:
#   bash scripts/gpu/build-bench-payload.sh
# Writes .whl/a (the SDK's runtime wheels, gradio, Debian's bubblewrap and libseccomp2) and .whl/b (the rest of OpenEnv 0.10.0's
# environment) for Python 3.12, each under the 64 MiB a call carries beside the working tree.
# Wheels the machine's image already holds (numpy, pandas, pillow, uvloop, hf_xet, pygments) are
# left out: the venvs made there see the system's site-packages.
set -euo pipefail
W=.whl
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo /.whl/ >> .git/info/exclude
PLAT="--only-binary=:all: --python-version 3.12 --implementation cp"
for n in 5 12 17 24 26 27 28 31 34 35; do PLAT="$PLAT --platform manylinux_2_${n}_x86_64"; done
PLAT="$PLAT --platform manylinux2014_x86_64 --platform manylinux1_x86_64"
rm -rf $W && mkdir -p $W/a/ours $W/b/oe
# ours: the runtime dependencies pinned as the dev venv has them
.venv/bin/python -m pip freeze 2>/dev/null > $W/dev-freeze.txt
.venv/bin/python - "$W/dev-freeze.txt" > $W/ours.txt <<'PY'
import sys, tomllib, re
from packaging.requirements import Requirement
deps = [Requirement(d).name.lower().replace("_", "-") for d in tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]]
pins = {}
for line in open(sys.argv[1]):
    if "==" in line:
        name, ver = line.strip().split("==", 1)
        pins[name.lower().replace("_", "-")] = ver
print("\n".join(f"{d}=={pins[d]}" if d in pins else d for d in deps + ["uvicorn[standard]", "psutil"]))
PY
python3 -m pip download -q $PLAT -d $W/a/ours -r $W/ours.txt 2> >(grep -v "is ignored" >&2)
.bench/openenv-venv/bin/python -m pip freeze > $W/oe.txt
python3 -m pip download -q $PLAT -d $W/b/oe -r $W/oe.txt 2> >(grep -v "is ignored" >&2)
for p in numpy pandas pillow uvloop hf_xet pygments; do rm -f $W/b/oe/${p}-*.whl; done
mv $W/b/oe/gradio-*.whl $W/a/
# bubblewrap and libseccomp2 for the sandboxed environments (benchmarks/bench_fork.py on terminal)
(cd $W/a && apt-get download bubblewrap libseccomp2 >/dev/null 2>&1)
du -sh $W/a $W/b
