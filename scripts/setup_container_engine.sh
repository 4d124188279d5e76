#!/usr/bin/env bash
# Make a real container engine available on a Debian bookworm machine without
# Docker Engine and without a registry: Podman (runc) with its Docker-compatible
# API on unix:///run/podman/podman.sock, plus a base image built with debootstrap.
#
# Idempotent; run as root. Every step is skipped when already done, so a re-run
# takes seconds. Progress goes to stderr; stdout carries only the export line, so:
#
#     eval "$(sudo scripts/setup_container_engine.sh)"
#
# Environment knobs (all optional):
#   OPENENV_BASE_IMAGE   tag of the base image to build (localhost/openenv-base:bookworm)
#   OPENENV_DEBIAN_MIRROR  mirror for debootstrap (http://deb.debian.org/debian)
#   OPENENV_SOCKET_WAIT_S  how long to wait for the API socket to answer (60)
set -euo pipefail

BASE_IMAGE="${OPENENV_BASE_IMAGE:-localhost/openenv-base:bookworm}"
MIRROR="${OPENENV_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
SOCKET_PATH="/run/podman/podman.sock"
SOCKET_URL="unix://${SOCKET_PATH}"
SOCKET_WAIT_S="${OPENENV_SOCKET_WAIT_S:-60}"
SERVICE_LOG="/var/log/openenv-podman-service.log"
CONF="/etc/containers/containers.conf"

START_US=${EPOCHREALTIME/./}
log() {
    local el_ms=$(((${EPOCHREALTIME/./} - START_US) / 1000))
    printf '[setup-engine %3d.%01ds] %s\n' $((el_ms / 1000)) $((el_ms % 1000 / 100)) "$*" >&2
}
die() { log "ERROR: $*"; exit 1; }

[[ "$(id -u)" == 0 ]] || die "run as root (it installs packages and starts a system service)"

# 1. Packages -------------------------------------------------------------------
missing=()
for pkg in podman runc debootstrap curl; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
    log "installing: ${missing[*]} (apt-get update first)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq "${missing[@]}" >&2
    log "packages installed"
else
    log "packages present: podman runc debootstrap curl"
fi

# 2. Engine configuration ---------------------------------------------------------
# crun fails here ("cgroups in hybrid mode not supported") and root lacks
# CAP_SYS_RESOURCE, so the default ulimits must stay below the hard limits.
WANT_CONF='[containers]
default_ulimits = ["nofile=16384:16384", "nproc=8192:8192"]

[engine]
runtime = "runc"'
mkdir -p /etc/containers
if [[ -f "$CONF" ]] && [[ "$(cat "$CONF")" == "$WANT_CONF" ]]; then
    log "$CONF up to date"
else
    [[ -f "$CONF" ]] && cp "$CONF" "$CONF.bak.$(date +%s)" && log "backed up old $CONF"
    printf '%s\n' "$WANT_CONF" >"$CONF"
    log "wrote $CONF (runtime=runc, ulimits)"
fi

# 3. Base image ---------------------------------------------------------------------
# Bump BASE_VERSION when the package list changes: an older image is then rebuilt.
BASE_VERSION=2
BASE_PACKAGES=python3,python3-venv,python3-pip,git,procps
have_version="$(podman image inspect --format '{{ index .Labels "org.openenv.base-version" }}' "$BASE_IMAGE" 2>/dev/null || true)"
if [[ "$have_version" == "$BASE_VERSION" ]]; then
    log "base image $BASE_IMAGE present (version $BASE_VERSION)"
else
    ROOTFS="$(mktemp -d /var/tmp/openenv-rootfs.XXXXXX)"
    trap 'rm -rf "$ROOTFS"' EXIT
    log "debootstrap bookworm ($BASE_PACKAGES) into $ROOTFS (about a minute)"
    debootstrap --variant=minbase --include="$BASE_PACKAGES" \
        bookworm "$ROOTFS" "$MIRROR" >"$ROOTFS.log" 2>&1 \
        || { tail -n 30 "$ROOTFS.log" >&2; die "debootstrap failed (log: $ROOTFS.log)"; }
    rm -f "$ROOTFS.log"
    rm -rf "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/lib/apt/lists/*
    log "importing rootfs as $BASE_IMAGE"
    tar -C "$ROOTFS" -c . | podman import --quiet \
        --change 'CMD ["/bin/bash"]' --change 'ENV LANG=C.UTF-8' \
        --change "LABEL org.openenv.base-version=$BASE_VERSION" - "$BASE_IMAGE" >/dev/null
    rm -rf "$ROOTFS"
    trap - EXIT
    log "base image $BASE_IMAGE built"
fi

# 4. Docker-compatible API service -------------------------------------------------
socket_answers() {
    curl -sf --max-time 2 --unix-socket "$SOCKET_PATH" http://d/_ping >/dev/null 2>&1
}
if socket_answers; then
    log "API socket $SOCKET_PATH answers"
else
    mkdir -p "$(dirname "$SOCKET_PATH")"
    rm -f "$SOCKET_PATH"
    log "starting podman system service on $SOCKET_URL (log: $SERVICE_LOG)"
    # from /: the service and every conmon it starts keep this working directory, and a checkout
    # removed later (a CI clone) would make each container start fail ("write child: broken pipe")
    # setsid -f: forked into a session of its own, so this script (and a caller's `$(...)` around it)
    # never waits on it; a backgrounded subshell here made bash wait for the service, forever.
    setsid -f env --chdir=/ podman system service --time=0 "$SOCKET_URL" >"$SERVICE_LOG" 2>&1 </dev/null
    deadline=$(($(date +%s) + SOCKET_WAIT_S))
    until socket_answers; do
        if (($(date +%s) >= deadline)); then
            tail -n 20 "$SERVICE_LOG" >&2 || true
            die "socket $SOCKET_PATH did not answer within ${SOCKET_WAIT_S}s"
        fi
        sleep 0.2
    done
    log "API socket answers"
fi

log "done; point the docker SDK/CLI at it with:"
echo "export DOCKER_HOST=${SOCKET_URL}"
