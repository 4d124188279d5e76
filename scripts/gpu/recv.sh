#!/bin/bash
# On the GPU machine: keep one carried part where the later calls find it (/tmp lives while the machine is warm).
# Part 1 holds the small wheels whole (vLLM's runtime dependencies, TRL, datasets): they are installed at once.
#   bash scripts/gpu/recv.sh .vc/pNN
set -e
source "$(dirname "$0")/env.sh"
mkdir -p $PARTS $CARRY
cp "$1"/* $PARTS/
echo "parts now: $(ls $PARTS | tr '\n' ' ') bytes=$(cat $PARTS/part?? | wc -c)"
if [ "$(basename "$1")" = p01 ]; then
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  python3 --version
  python3 -m pip list --format=freeze 2>/dev/null > ${OUT:-/tmp}/image-freeze.txt
  grep -i -E '^(torch|transformers|accelerate|tokenizers|safetensors|numpy|pyarrow|httpx|huggingface.hub|triton)==' ${OUT:-/tmp}/image-freeze.txt | tr '\n' ' '; echo
  t=$(date +%s.%N)
  tar xf $PARTS/part00 -C $CARRY 2>/dev/null || true   # part 1 ends inside the vLLM wheel: tar stops there
  pip_install $CARRY/whl/*.whl
  echo "$(ls $CARRY/whl | wc -l) small wheels installed in $(since $t) s"
fi
