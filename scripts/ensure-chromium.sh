#!/usr/bin/env bash
# Installs Debian's Chromium for the console's browser tests (test/integration/console*.test.ts) when
# it is missing: playwright-core drives /usr/bin/chromium and never downloads a browser of its own.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then exit 0; fi
echo "Installing chromium (apt-get) for the console's browser tests..." >&2
if [ "$(id -u)" -ne 0 ]; then
  echo "chromium is missing and this is not root: run 'sudo apt-get install -y chromium'" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
apt-get install -y -qq --no-install-recommends chromium >&2
