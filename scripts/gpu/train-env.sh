#!/bin/bash
# GPU: "Train your environment" (docs/trainers/train-your-environment.md) with SmolLM2-135M-Instruct:
# a fresh `openenv init` scaffold, its oracle's episodes, the SFT warm-up, then TRL's GRPOTrainer.
#   bash scripts/gpu/train-env.sh [train_env options]
# Needs the payload's small wheels and model (recv.sh .vc/p01 ... install.sh .vc/p09; vLLM is not used).
# Writes summary.json and train.log to $OUT (or ./train-env-out); the model stays in /tmp/train-env-run.
H=$(cd "$(dirname "$0")" && pwd)
source $H/env.sh
O=${OUT:-$REPO/train-env-out}; mkdir -p $O
rm -rf /tmp/my_env && python3 -c "from openenv_sdk.cli.init import scaffold; scaffold('my_env', '/tmp')"
cd $REPO
set -o pipefail
python3 -m openenv_trainers.train_env /tmp/my_env --model smollm2 --gguf-dir $CARRY/model --cache-dir /tmp/train-env-cache \
  --out /tmp/train-env-run "$@" 2>&1 | grep --line-buffered -v -E 'it/s\]' | tee $O/train.log
rc=$?
cp /tmp/train-env-run/summary.json $O/ 2>/dev/null
exit $rc
