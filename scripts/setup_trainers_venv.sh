#!/usr/bin/env bash
# The trainers (their own distribution: torch, transformers, trl) in .venv-trainers.
# torch is pinned first: unpinned, it pulls GB of CUDA wheels.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv-trainers/bin/python ] || python3 -m venv .venv-trainers
.venv-trainers/bin/pip install -q --disable-pip-version-check torch==2.13.0
.venv-trainers/bin/pip install -q --disable-pip-version-check -e ".[docker]" -e "trainers[dev]"
# mypy (the SDK's dev extras' spec): trainers/tests/test_typecheck.py checks trainers/ against this venv's torch and TRL
.venv-trainers/bin/pip install -q --disable-pip-version-check "mypy>=1.10"
