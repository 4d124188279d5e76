#!/usr/bin/env bash
# Set up what benchmarks/bench_echo.py needs besides our dev venv (.venv):
#
#   .bench/openenv-venv  the public `openenv` package (OpenEnv's server), kept apart from ours
#   .bench/tools         matplotlib (the concurrency plot) and py-spy (profiling a server)
#
# Both are repo-relative and gitignored. Idempotent: what is already installed is kept.
#
# Usage: bash benchmarks/setup_openenv_venv.sh [--openenv-only]
#   --openenv-only           skip the tools venv (the test command needs OpenEnv alone)
#   OPENENV_VERSION=0.10.0   version to install (default 0.10.0)
#   PYTHON=python3.11        interpreter that creates the venvs (default: python3)
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
openenv_venv="${repo_root}/.bench/openenv-venv"
tools_venv="${repo_root}/.bench/tools"
version="${OPENENV_VERSION:-0.10.0}"
python="${PYTHON:-python3}"

pip_install() {
    local venv="$1"
    shift
    # The local pip config lists optional file indexes; drop its "is ignored" noise.
    "${venv}/bin/python" -m pip install --quiet "$@" 2> >(grep -v "is ignored: it is neither" >&2)
}

make_venv() {
    if [[ ! -x "$1/bin/python" ]]; then
        "${python}" -m venv "$1"
        pip_install "$1" --upgrade pip
    fi
}

openenv_version() {
    "${openenv_venv}/bin/python" -c 'import importlib.metadata as m; print(m.version("openenv"))' 2>/dev/null || true
}

mkdir -p "${repo_root}/.bench"

# OpenEnv. uvloop and httptools come with uvicorn[standard]: the same event loop and HTTP
# parser our server gets, so the comparison is not skewed by them (a bare `pip install
# openenv` has neither).
if [[ -x "${openenv_venv}/bin/python" && "$(openenv_version)" == "${version}" ]] \
    && "${openenv_venv}/bin/python" -c 'import openenv.core.env_server.http_server, fastmcp, uvloop, httptools' 2>/dev/null; then
    echo "openenv ${version} already installed in ${openenv_venv}"
else
    make_venv "${openenv_venv}"
    pip_install "${openenv_venv}" "openenv==${version}" "uvicorn[standard]"
    "${openenv_venv}/bin/python" -c 'import openenv.core.env_server.http_server, fastmcp, uvicorn'
    echo "openenv $(openenv_version) installed in ${openenv_venv}"
fi

if [[ "${1:-}" == "--openenv-only" ]]; then
    exit 0
fi

# Tools: optional; the benchmark skips the plot (with a note) when matplotlib is missing.
if [[ -x "${tools_venv}/bin/python" ]] && "${tools_venv}/bin/python" -c 'import matplotlib' 2>/dev/null \
    && [[ -x "${tools_venv}/bin/py-spy" ]]; then
    echo "matplotlib and py-spy already installed in ${tools_venv}"
else
    make_venv "${tools_venv}"
    if pip_install "${tools_venv}" matplotlib py-spy; then
        echo "matplotlib and py-spy installed in ${tools_venv}"
    else
        echo "warning: could not install matplotlib/py-spy in ${tools_venv}; the plot will be skipped" >&2
    fi
fi
