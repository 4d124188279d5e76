#!/bin/bash
# Two GPUs: vLLM alone on GPU 1, the trainer on GPU 0, weights over NCCL (TRL's WeightTransferClient),
# the same task, model and budget as train.sh's one-GPU run. NVLink multicast stays off (env.sh).
#   bash scripts/gpu/train-2gpu.sh [async_grpo_guess.py options]
# After install.sh (as for one GPU); it starts vLLM itself (gpu-memory-utilization 0.85, its own GPU).
H=$(cd "$(dirname "$0")" && pwd)
source $H/env.sh
[ "$(nvidia-smi -L | wc -l)" -ge 2 ] || { echo "train-2gpu.sh needs two GPUs; nvidia-smi -L shows:"; nvidia-smi -L; exit 2; }
VLLM_GPU=1 TRANSFER=nccl bash $H/serve-vllm.sh 0.85 || exit 1
CUDA_VISIBLE_DEVICES=0 bash $H/train.sh --transfer nccl "$@"
