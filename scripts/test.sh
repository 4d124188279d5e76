#!/usr/bin/env bash
# The whole test suite, as CI runs it: a venv with the dev extras, a container engine when
# none is reachable (Podman with the Docker API, set up by scripts/setup_container_engine.sh
# where this is root on Debian), then pytest. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
# Where the time goes, on stderr (a CI log that is cut keeps it); every setup step is bounded.
step() { echo "[test.sh $((SECONDS / 60))m$((SECONDS % 60))s] $*" >&2; }
step "dev venv"
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install -q --disable-pip-version-check -e ".[dev]"

# Isolation for sandboxed environments (bubblewrap): required, never skipped.
step "sandbox (bubblewrap)"
timeout 600 bash scripts/setup_sandbox.sh

engine_ok() { .venv/bin/python -c "import docker, sys; docker.from_env(timeout=5).ping()" >/dev/null 2>&1; }
if [ -z "${DOCKER_HOST:-}" ] && [ -S /run/podman/podman.sock ]; then
  export DOCKER_HOST=unix:///run/podman/podman.sock
fi
if ! engine_ok && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null && [ -f scripts/setup_container_engine.sh ]; then
  step "container engine"
  eval "$(timeout 900 bash scripts/setup_container_engine.sh | grep '^export ')"
fi
if engine_ok; then
  export OPENENV_TEST_CONTAINERS=1
  # No registry here: images build on the local base image the setup script made.
  if command -v podman >/dev/null && podman image exists localhost/openenv-base:bookworm 2>/dev/null; then
    export OPENENV_BASE_IMAGE="${OPENENV_BASE_IMAGE:-localhost/openenv-base:bookworm}"
  fi
  echo "container engine: ${DOCKER_HOST:-default} (container tests enabled)"
else
  echo "container engine: none reachable (container tests skipped)"
fi
# A real browser for the playground test (Debian's chromium, driven by Playwright).
step "browser"
if [ -f scripts/setup_browser.sh ] && timeout 600 bash scripts/setup_browser.sh; then
  export OPENENV_TEST_BROWSER=1
fi
export HF_HUB_OFFLINE=1
# The public OpenEnv package, in a venv of its own, for the compatibility tests (our client on its
# server, its CLI on our scaffold): with the variable set, a missing install fails those tests.
step "public OpenEnv venv"
timeout 900 bash benchmarks/setup_openenv_venv.sh --openenv-only
export OPENENV_REFERENCE_VENV="$PWD/.bench/openenv-venv"

failed=""  # the suites that failed, named at the end
# The trainers (their own distribution: torch, transformers, trl) in their own venv.
# torch is pinned first: unpinned, it pulls GB of CUDA wheels.
if [ -d trainers ]; then
  step "trainers venv"
  [ -x .venv-trainers/bin/python ] || python3 -m venv .venv-trainers
  .venv-trainers/bin/pip install -q --disable-pip-version-check torch==2.13.0
  .venv-trainers/bin/pip install -q --disable-pip-version-check -e ".[docker]" -e "trainers[dev]"
  # each suite runs whatever the one before it did: a failure must not hide the others' results
  step "trainers suite"
  (cd trainers && ../.venv-trainers/bin/python -m pytest "$@") || failed="$failed trainers"
  # The third-party trainers' adapters (verifiers, SkyRL, ART, verl), against the real packages in a
  # venv of their own (scripts/setup_trainer_adapters.sh says why).
  step "trainer adapters venv"
  timeout 1200 bash scripts/setup_trainer_adapters.sh
  step "trainer adapters suite"
  (cd trainers && ../.venv-adapters/bin/python -m pytest adapter_tests "$@") || failed="$failed adapters"
fi

step "main suite"
.venv/bin/python -m pytest "$@" || failed="$failed main"
step "done"
if [ -n "${failed:-}" ]; then
  echo "test suites that failed:$failed"
  exit 1
fi
