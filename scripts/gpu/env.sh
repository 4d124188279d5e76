# Sourced by the GPU-side scripts: where things are installed and the variables vLLM and the trainer need.
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
export SITE=/tmp/site CARRY=/tmp/carry PARTS=/tmp/parts MODEL_DIR=/tmp/smollm2 VLLM_PORT=${VLLM_PORT:-8000}
export PYTHONPATH=$SITE:$REPO:$REPO/trainers
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1
export VLLM_USE_FLASHINFER_SAMPLER=0   # flashinfer is not carried
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
pip_install() { python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target $SITE "$@" 2>&1 | grep -v 'Running pip as' || true; }
since() { python3 -c "import time,sys; print(round(time.time()-float(sys.argv[1]),1))" "$1"; }
