#!/bin/bash
# On the GPU machine, after install-bench.sh .whl/a and .whl/b: the CPU server benchmarks on its
# quiet cores, in the background (they outlive the call; poll LOG): the 10,000-session churn and
# the WS floor (ours, ours-before from BASE if given, bare-ws, OpenEnv), then the fork latency.
#   bash scripts/gpu/bench-cpu.sh OUTDIR [BASE_SRC]
set -uo pipefail
out=$1; base=${2:-}
mkdir -p "$out"
args=(--churn 10000 --churn-only --churn-clients websockets,raw --churn-client-procs 4 --floor-rounds 5
      --phase-timeout 300 --step-timeout 120 --json "$out/churn.json")
[[ -n $base ]] && args+=(--baseline-src "$base" --baseline-label "commit 848e865 (before this session)")
setsid nohup bash -c "
  export PYTHONUNBUFFERED=1
  .venv/bin/python benchmarks/bench_echo.py ${args[*]@Q} > $out/churn.log 2>&1
  .venv/bin/python benchmarks/bench_fork.py --runs 100 > $out/fork.log 2>&1
  .venv/bin/python benchmarks/bench_fork.py --runs 100 --json > $out/fork.json 2>>$out/fork.log
  echo ALL-DONE >> $out/churn.log
" > /dev/null 2>&1 &
echo "started: tail $out/churn.log"
