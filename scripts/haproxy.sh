#!/usr/bin/env bash
# Make sure `haproxy` (the load balancer the scale-out test and bench put in front of the gateways) is installed.
# Idempotent and silent when it already is; otherwise installs the Debian package.
set -euo pipefail

command -v haproxy >/dev/null 2>&1 && exit 0

die() {
  echo "haproxy.sh: ERROR: $*" >&2
  exit 1
}

command -v apt-get >/dev/null 2>&1 || die "haproxy is not installed and apt-get is not available; install haproxy yourself"

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO=(sudo -n)
  else
    die "haproxy is not installed; run as root (or with passwordless sudo): apt-get install haproxy"
  fi
fi

LOG="${SERVICES_LOG:-/tmp/queryapigate-services.log}"
echo "haproxy.sh: installing haproxy (log: $LOG)" >&2
if ! "${SUDO[@]}" apt-get -o DPkg::Lock::Timeout=120 update >>"$LOG" 2>&1 ||
  ! "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=120 \
    install -y --no-install-recommends haproxy >>"$LOG" 2>&1; then
  tail -n 20 "$LOG" >&2
  die "apt-get install haproxy failed"
fi
command -v haproxy >/dev/null 2>&1 || die "haproxy still not on PATH after installing it"
