#!/bin/bash
# The last part's call: receive it, check the joined stream, install vLLM 0.26.0, build the model folder.
#   bash scripts/gpu/install.sh .vc/pNN
set -e
H=$(cd "$(dirname "$0")" && pwd)
source $H/env.sh
bash $H/recv.sh "$1"
t=$(date +%s.%N)
cat $PARTS/part?? > /tmp/stream.tar
(cd /tmp && sha256sum -c $PARTS/SHA256SUMS) || { echo "stream checksum mismatch"; exit 1; }
tar xf /tmp/stream.tar -C $CARRY && rm /tmp/stream.tar
PYTHONPATH=$SITE python3 -c "import fastapi" 2>/dev/null || pip_install $CARRY/whl/*.whl
pip_install $CARRY/big/*.whl
echo "installed in $(since $t) s"
python3 -m pip check > ${OUT:-/tmp}/pipcheck.txt 2>&1 || true
t=$(date +%s.%N)
python3 $H/gguf2hf.py $CARRY/model SmolLM2-135M-Instruct.Q4_1.gguf $MODEL_DIR 2>&1 | grep -v -E 'it/s\]|GGUF checkpoint'
echo "model folder $MODEL_DIR built in $(since $t) s"
python3 -c "import vllm, trl, datasets, openenv_sdk, openenv_trainers; print('vllm', vllm.__version__, 'trl', trl.__version__, 'datasets', datasets.__version__)"
