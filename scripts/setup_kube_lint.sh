#!/usr/bin/env bash
# checkov, the Kubernetes policy linter that tests/deploy/test_kubernetes_policy.py runs over the
# objects `openenv deploy` prints, in a venv of its own (.cache/kubelint-venv): its pins (packaging,
# networkx, boto3, ...) would move the dev venv's. Schema validation (kubernetes-validate) is in
# the dev extras.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.cache/kubelint-venv
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/pip" install -q --disable-pip-version-check "checkov>=3.2,<4"
"$VENV/bin/checkov" --version
