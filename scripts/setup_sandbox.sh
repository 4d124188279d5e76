#!/usr/bin/env bash
# bubblewrap, the isolation every sandboxed environment's session runs in (openenv_sdk.sandbox).
# Idempotent; as root on Debian/Ubuntu it installs the package, elsewhere it only checks.
# Exit 0 when a sandboxed command runs here, 1 (with the reason) when it cannot.
set -euo pipefail
if ! command -v bwrap >/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "[setup-sandbox] installing bubblewrap" >&2
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq >&2 && apt-get install -y -qq bubblewrap >&2
    else
        echo "[setup-sandbox] bubblewrap is missing (apt-get install bubblewrap)" >&2
        exit 1
    fi
fi
if ! bwrap --unshare-pid --unshare-net --die-with-parent --ro-bind / / --proc /proc --dev /dev true 2>/dev/null \
    && ! bwrap --unshare-all --die-with-parent --ro-bind / / --proc /proc --dev /dev true; then
    echo "[setup-sandbox] bubblewrap is installed but cannot create namespaces here" >&2
    exit 1
fi
echo "[setup-sandbox] bubblewrap $(bwrap --version | cut -d' ' -f2) works" >&2
