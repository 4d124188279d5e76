#!/usr/bin/env bash
# Create .bench/openenv-venv (repo-relative, gitignored) holding the public
# `openenv` package, so bench_echo.py can run OpenEnv's server beside ours.
#
# Idempotent: a venv that already imports openenv at the pinned version is kept.
#
# Usage: bash benchmarks/setup_openenv_venv.sh
#   OPENENV_VERSION=0.10.0   version to install (default 0.10.0)
#   PYTHON=python3.11        interpreter that creates the venv (default: python3)
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${repo_root}/.bench/openenv-venv"
version="${OPENENV_VERSION:-0.10.0}"
python="${PYTHON:-python3}"

installed_version() {
    "${venv}/bin/python" -c 'import importlib.metadata as m; print(m.version("openenv"))' 2>/dev/null || true
}

if [[ -x "${venv}/bin/python" && "$(installed_version)" == "${version}" ]]; then
    # Also check that the server modules import (a half-finished install would fail here).
    if "${venv}/bin/python" -c 'import openenv.core.env_server.http_server, fastmcp, uvicorn' 2>/dev/null; then
        echo "openenv ${version} already installed in ${venv}"
        exit 0
    fi
fi

mkdir -p "${repo_root}/.bench"
if [[ ! -x "${venv}/bin/python" ]]; then
    "${python}" -m venv "${venv}"
fi
pip_install() {
    # The local pip config lists optional file indexes; drop its "is ignored" noise.
    "${venv}/bin/python" -m pip install --quiet "$@" 2> >(grep -v "is ignored: it is neither" >&2)
}
pip_install --upgrade pip
# uvloop and httptools: the same fast loop and parser our server gets from
# uvicorn[standard], so the comparison is not skewed by the event loop.
pip_install "openenv==${version}" "uvicorn[standard]"
"${venv}/bin/python" -c 'import openenv.core.env_server.http_server, fastmcp, uvicorn'
echo "openenv $(installed_version) installed in ${venv}"
