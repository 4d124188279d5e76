#!/usr/bin/env bash
# The whole test suite, as CI runs it: each step sets up what its tests need (a script of its
# own, bounded by a timeout), then the suites run. Extra arguments go to pytest.
#   OPENENV_TEST_SUITES="trainers adapters main"   the suites to run (default: all three)
# It prints what it enabled and what it skipped, and why; a suite that fails does not stop the
# others, and the exit status names the failed ones.
set -euo pipefail
cd "$(dirname "$0")/.."
suites="${OPENENV_TEST_SUITES:-trainers adapters main}"
enabled=() skipped=() failed=()
step() { echo "[test.sh $((SECONDS / 60))m$((SECONDS % 60))s] $*" >&2; }
wants() { [[ " $suites " == *" $1 "* ]]; }

step "dev venv (.venv)"
[ -x .venv/bin/python ] || python3 -m venv .venv
timeout 1200 .venv/bin/pip install -q --disable-pip-version-check -e ".[dev]"

step "sandbox: bubblewrap, required by the sandboxed environments (never skipped)"
timeout 600 bash scripts/setup_sandbox.sh
enabled+=("sandbox")

step "container engine"
if engine_exports="$(bash scripts/enable_container_engine.sh)"; then
  eval "$engine_exports"
  enabled+=("container tests")
else
  skipped+=("container tests (no engine: see above)")
fi

step "browser (the playground's end-to-end test)"
if timeout 600 bash scripts/setup_browser.sh; then
  export OPENENV_TEST_BROWSER=1
  enabled+=("browser test")
else
  skipped+=("browser test (no chromium: see above)")
fi

step "public OpenEnv venv (compatibility tests; with the variable set, a missing install fails them)"
timeout 900 bash benchmarks/setup_openenv_venv.sh --openenv-only
export OPENENV_REFERENCE_VENV="$PWD/.bench/openenv-venv" HF_HUB_OFFLINE=1
enabled+=("OpenEnv compatibility tests")

# each suite ends with its 30 slowest tests and their times (pytest --durations)
durations=(--durations=30 --durations-min=1.0)
run_suite() {  # name, then the command; a failure is recorded, not fatal
  local name="$1"; shift
  step "$name suite"
  if "$@"; then enabled+=("$name suite"); else failed+=("$name"); fi
}
if wants trainers; then
  step "trainers venv (.venv-trainers)"
  timeout 1200 bash scripts/setup_trainers_venv.sh
  step "agents: node and npm, and the registry agents (trainers/tests/test_agents_e2e.py; never skipped)"
  timeout 1500 bash scripts/setup_agents.sh
  run_suite trainers bash -c 'cd trainers && ../.venv-trainers/bin/python -m pytest "$@"' _ "${durations[@]}" "$@"
fi
if wants adapters; then
  # the third-party trainers' adapters (verifiers, SkyRL, ART, verl) against the real packages
  step "trainer adapters venv (.venv-adapters)"
  timeout 1200 bash scripts/setup_trainer_adapters.sh
  run_suite adapters bash -c 'cd trainers && ../.venv-adapters/bin/python -m pytest adapter_tests "$@"' _ "${durations[@]}" "$@"
fi
if wants main; then
  step "Kubernetes policy linter: checkov in .cache/kubelint-venv (tests/deploy/test_kubernetes_policy.py; never skipped)"
  timeout 900 bash scripts/setup_kube_lint.sh
  run_suite main .venv/bin/python -m pytest "${durations[@]}" "$@"
fi

step "done"
echo "enabled: ${enabled[*]:-nothing}" >&2
for s in "${skipped[@]}"; do echo "skipped: $s" >&2; done
if ((${#failed[@]})); then
  echo "test suites that failed: ${failed[*]}" >&2
  exit 1
fi
