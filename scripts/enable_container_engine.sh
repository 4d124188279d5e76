#!/usr/bin/env bash
# Find (or, as root on Debian, set up) a container engine for the container tests. Prints the
# `export` lines the caller evals on stdout, and why on stderr; exit 1 when none is reachable.
#   eval "$(bash scripts/enable_container_engine.sh)"
set -euo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-.venv/bin/python}"
engine_ok() { "$python" -c "import docker; docker.from_env(timeout=5).ping()" >/dev/null 2>&1; }
if [ -z "${DOCKER_HOST:-}" ] && [ -S /run/podman/podman.sock ]; then
  export DOCKER_HOST=unix:///run/podman/podman.sock
fi
if ! engine_ok && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  # Podman with the Docker API and a local base image (no registry here); bounded, never hangs CI
  eval "$(timeout 900 bash scripts/setup_container_engine.sh | grep '^export ')"
fi
if ! engine_ok; then
  echo "no container engine reachable (DOCKER_HOST=${DOCKER_HOST:-unset}); not root on Debian, so none was set up" >&2
  exit 1
fi
[ -n "${DOCKER_HOST:-}" ] && echo "export DOCKER_HOST=$DOCKER_HOST"
echo "export OPENENV_TEST_CONTAINERS=1"
# images build on the local base image the setup script made
if command -v podman >/dev/null && timeout 60 podman image exists localhost/openenv-base:bookworm 2>/dev/null; then
  echo "export OPENENV_BASE_IMAGE=${OPENENV_BASE_IMAGE:-localhost/openenv-base:bookworm}"
fi
echo "container engine: ${DOCKER_HOST:-default}" >&2
