#!/bin/bash
# Train: AsyncGRPOTrainer + EnvRolloutWorker + the vLLM server started by serve-vllm.sh, on this GPU.
#   bash scripts/gpu/train.sh [async_grpo_guess.py options]
# Writes run.json, train.log and vllm.log to $OUT (or ./async-grpo-out).
H=$(cd "$(dirname "$0")" && pwd)
source $H/env.sh
O=${OUT:-$REPO/async-grpo-out}; mkdir -p $O
cd $REPO
set -o pipefail
python3 $H/async_grpo_guess.py --model-dir $MODEL_DIR --vllm-url http://127.0.0.1:$VLLM_PORT --out $O "$@" 2>&1 \
  | grep -v -E 'it/s\]|^Loading weights' | tee $O/train.log
rc=$?
grep -v -E 'POST /v1/completions|GET /health' /tmp/vllm.log | tail -300 > $O/vllm.log
nvidia-smi --query-gpu=memory.used --format=csv,noheader
exit $rc
