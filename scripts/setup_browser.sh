#!/usr/bin/env bash
# A headless browser for the playground's end-to-end test (tests/web/): Debian's chromium.
# Playwright drives it (`executable_path`); Playwright's own browser download is never used.
# Idempotent: does nothing when chromium is already installed; needs root and apt-get otherwise.
set -euo pipefail
for candidate in chromium chromium-browser; do
  if command -v "$candidate" >/dev/null 2>&1; then
    echo "browser: $(command -v "$candidate")"
    exit 0
  fi
done
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "browser: none (install Debian's chromium as root: apt-get install chromium)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null
apt-get install -y -q --no-install-recommends chromium fonts-dejavu-core >/dev/null
echo "browser: $(command -v chromium)"
