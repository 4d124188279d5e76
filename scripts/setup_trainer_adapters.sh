#!/usr/bin/env bash
# The third-party trainers' adapters (trainers/openenv_trainers/adapters/) are tested against the
# real packages, in a venv of their own: .venv-adapters, with verifiers, skyrl-gym, openpipe-art
# and verl (with torch, pinned to the local CPU wheel, and TRL, for the tiny model verl's test
# generates with), the SDK (editable) and openenv_trainers (its own dependencies come with them).
# They cannot join the trainers' venv: verifiers pins mcp==2.0.0, which the SDK (mcp>=2.3) cannot
# share a resolve with, and verl pins transformers<5.11. The SDK is installed after the trainers,
# so its mcp wins; verifiers' host side uses mcp only for tool servers it launches itself (the
# adapter launches none), and the agent's chat program gets mcp 2.0.0 in its own uv environment.
# pip reports that conflict on every run; it is expected.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-adapters
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
pip=("$VENV/bin/pip" install -q --disable-pip-version-check)
"${pip[@]}" verifiers==0.4.0 skyrl-gym==0.4.0 openpipe-art==0.5.18
"${pip[@]}" torch==2.13.0
# cachetools: verl's agent loop imports it without declaring it; jmespath: TRL's response parser (the tiny model's tool calls).
"${pip[@]}" torch==2.13.0 verl==0.9.0 cachetools trl==1.16.0 jmespath
# [docker]: the suite removes the images and containers it made at its end (openenv_sdk.testing.labelled_builds)
"${pip[@]}" -e ".[docker]"
"${pip[@]}" --no-deps -e trainers
# uv runs verifiers' chat program (a PEP 723 script); pytest runs the tests; mypy type-checks the
# adapters against these trainers (adapter_tests/test_typecheck.py).
"${pip[@]}" uv pytest pytest-timeout "mypy>=1.10"
"$VENV/bin/python" -c "import verifiers.v1, skyrl_gym, art, verl.experimental.agent_loop.tool_agent_loop, openenv_sdk, openenv_trainers_verifiers, docker"
