#!/bin/bash

# (offline: dropped by openenv harbor import) apt-get update
# (offline: dropped by openenv harbor import) apt-get install -y curl

# (offline: dropped by openenv harbor import) curl -LsSf https://astral.sh/uv/0.9.5/install.sh | sh

# (offline: dropped by openenv harbor import) source $HOME/.local/bin/env

if [ "$PWD" = "/" ]; then
    echo "Error: No working directory set. Please set a WORKDIR in your Dockerfile before running this script."
    exit 1
fi

"${PYTHON:-python3}" -m pytest -p no:cacheprovider /tests/test_outputs.py -rA

if [ $? -eq 0 ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
