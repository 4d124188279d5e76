#!/usr/bin/env bash
# The third-party trainers' adapters (trainers/openenv_trainers/adapters/) are tested against the
# real packages, in a venv of their own: .venv-adapters, with verifiers, skyrl-gym and
# openpipe-art, the SDK (editable) and openenv_trainers without its torch stack (the adapters
# import neither torch nor TRL). They cannot join the trainers' venv: verifiers pins mcp==2.0.0,
# which the SDK (mcp>=2.3) cannot share a resolve with. The SDK is installed after the trainers,
# so its mcp wins; verifiers' host side uses mcp only for tool servers it launches itself (the
# adapter launches none), and the agent's chat program gets mcp 2.0.0 in its own uv environment.
# pip reports that conflict on every run; it is expected.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-adapters
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
pip=("$VENV/bin/pip" install -q --disable-pip-version-check)
"${pip[@]}" verifiers==0.4.0 skyrl-gym==0.4.0 openpipe-art==0.5.18
"${pip[@]}" -e .
"${pip[@]}" --no-deps -e trainers
# uv runs verifiers' chat program (a PEP 723 script); pytest runs the tests.
"${pip[@]}" uv pytest pytest-timeout
"$VENV/bin/python" -c "import verifiers.v1, skyrl_gym, art, openenv_sdk, openenv_trainers_verifiers"
