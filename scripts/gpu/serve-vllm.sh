#!/bin/bash
# Start vLLM on the model folder in the background (its own session: it outlives the call) and wait for /health.
#   bash scripts/gpu/serve-vllm.sh [GPU_MEMORY_UTILIZATION] [MODEL_DIR]
# VLLM_SERVER_DEV_MODE=1 exposes /pause, /resume and /collective_rpc, which the one-GPU weight sync
# (openenv_trainers.vllm_sync.VLLMReloadWeightTransfer) uses. The log is /tmp/vllm.log.
# Two GPUs (issue: vLLM on one, the trainer on the other): VLLM_GPU=1 TRANSFER=nccl adds
# --weight-transfer-config '{"backend":"nccl"}' for TRL's NCCL WeightTransferClient (train-2gpu.sh).
H=$(cd "$(dirname "$0")" && pwd)
source $H/env.sh
UTIL=${1:-0.25}; M=${2:-$MODEL_DIR}
EXTRA=()
[ "${TRANSFER:-reload}" = nccl ] && EXTRA=(--weight-transfer-config '{"backend":"nccl"}')
[ -n "${VLLM_GPU:-}" ] && export CUDA_VISIBLE_DEVICES=$VLLM_GPU
t=$(date +%s.%N)
VLLM_SERVER_DEV_MODE=1 setsid python3 -m vllm.entrypoints.cli.main serve $M --served-model-name smollm2 \
    --host 127.0.0.1 --port $VLLM_PORT --max-model-len 2048 --seed 0 --dtype bfloat16 \
    --gpu-memory-utilization $UTIL --logprobs-mode processed_logprobs --max-logprobs 20 "${EXTRA[@]}" \
    > /tmp/vllm.log 2>&1 < /dev/null &
echo $! > /tmp/vllm.pid
for i in $(seq 1 400); do
  if python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$VLLM_PORT/health', timeout=1)" 2>/dev/null; then
    echo "vLLM ready after $(since $t) s (gpu-memory-utilization $UTIL)"; nvidia-smi --query-gpu=memory.used --format=csv,noheader
    grep -E 'Using .*backend|KV cache|Loading weights took|Model loading took|torch.compile takes|init engine' /tmp/vllm.log | cut -c1-200 | head -12
    exit 0
  fi
  kill -0 $(cat /tmp/vllm.pid) 2>/dev/null || break
  sleep 0.5
done
echo "vLLM NOT ready after $(since $t) s"; tail -60 /tmp/vllm.log; exit 1
