#!/bin/bash
# On the GPU machine: install one part of the CPU-benchmark payload (build-bench-payload.sh).
#   bash scripts/gpu/install-bench.sh .whl/a     # carry: [".whl/a"]
#   bash scripts/gpu/install-bench.sh .whl/b     # carry: [".whl/b"], the next call (the machine stays warm ~30 s)
# Makes .venv (ours: the SDK runs from the checkout, through a .pth; `openenv` in .venv/bin as here) and .bench/openenv-venv (OpenEnv 0.10.0,
# where benchmarks/bench_echo.py looks for it), both over the system's site-packages.
set -euo pipefail
part=$1
for v in .venv .bench/openenv-venv; do
    [[ -x $v/bin/python ]] || python3 -m venv --system-site-packages --without-pip $v
done
# --target into the venv's site-packages: works with any pip the image has
pipi() { python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$("$1" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" "${@:2}"; }
if [[ -d $part/ours ]]; then
    pipi .venv/bin/python $part/ours/*.whl
    site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    echo "$PWD" > "$site/openenv_sdk_checkout.pth"
    printf '#!%s\nimport sys\nfrom openenv_sdk.cli.main import main\nsys.exit(main())\n' "$PWD/.venv/bin/python" > .venv/bin/openenv
    chmod +x .venv/bin/openenv
fi
if [[ -d $part/oe ]]; then pipi .bench/openenv-venv/bin/python $part/oe/*.whl $(ls .bench/gradio-*.whl 2>/dev/null); fi
# bubblewrap for the sandbox (dpkg -x: nothing else of the system touched)
if compgen -G "$part/bubblewrap_*.deb" > /dev/null; then
    command -v bwrap >/dev/null || dpkg -x $part/bubblewrap_*.deb /
    ldconfig -p | grep -q libseccomp.so.2 || { dpkg -x $part/libseccomp2_*.deb /; ldconfig; }
    bwrap --ro-bind / / --unshare-all --die-with-parent true && echo "bwrap runs"
fi
if compgen -G "$part/gradio-*.whl" > /dev/null; then mkdir -p .bench && cp $part/gradio-*.whl .bench/; fi
.venv/bin/python -c "import sys; import openenv_sdk, websockets, uvicorn; print('ours ok', openenv_sdk.__version__, sys.version.split()[0])"
if [[ -d $part/oe ]]; then .bench/openenv-venv/bin/python -c "import openenv.core.env_server.http_server, fastmcp; print('openenv ok')"; fi
nproc; uptime
