#!/bin/bash
# Stop the vLLM server that serve-vllm.sh started (its process group) and start it again: bash scripts/gpu/restart-vllm.sh [UTIL]
H=$(cd "$(dirname "$0")" && pwd)
if [ -f /tmp/vllm.pid ]; then
  p=$(cat /tmp/vllm.pid); kill -TERM -- -$p 2>/dev/null
  for i in $(seq 1 60); do kill -0 $p 2>/dev/null || break; sleep 0.5; done; kill -KILL -- -$p 2>/dev/null; sleep 2
fi
bash $H/serve-vllm.sh "$@"
