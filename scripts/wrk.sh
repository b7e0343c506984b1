#!/usr/bin/env bash
# Make sure `wrk` (the HTTP load generator bench/load.ts drives) is installed.
# Idempotent and silent when it already is; otherwise installs the Debian package.
set -euo pipefail

command -v wrk >/dev/null 2>&1 && exit 0

die() {
  echo "wrk.sh: ERROR: $*" >&2
  exit 1
}

command -v apt-get >/dev/null 2>&1 || die "wrk is not installed and apt-get is not available; install wrk yourself"

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO=(sudo -n)
  else
    die "wrk is not installed; run as root (or with passwordless sudo): apt-get install wrk"
  fi
fi

LOG="${SERVICES_LOG:-/tmp/queryapigate-services.log}"
echo "wrk.sh: installing wrk (log: $LOG)" >&2
if ! "${SUDO[@]}" apt-get -o DPkg::Lock::Timeout=120 update >>"$LOG" 2>&1 ||
  ! "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=120 \
    install -y --no-install-recommends wrk >>"$LOG" 2>&1; then
  tail -n 20 "$LOG" >&2
  die "apt-get install wrk failed"
fi
command -v wrk >/dev/null 2>&1 || die "wrk still not on PATH after installing it"
