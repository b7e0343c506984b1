#!/usr/bin/env bash
# Make sure the command NAME is installed, from the Debian package PACKAGE (default NAME): the shared
# body of scripts/haproxy.sh and scripts/wrk.sh. Idempotent and silent when it already is.
#   scripts/ensure-deb.sh NAME [PACKAGE]
set -euo pipefail

NAME="$1"
PACKAGE="${2:-$1}"
ME="${NAME}.sh"

command -v "$NAME" >/dev/null 2>&1 && exit 0

die() {
  echo "$ME: ERROR: $*" >&2
  exit 1
}

command -v apt-get >/dev/null 2>&1 || die "$NAME is not installed and apt-get is not available; install $PACKAGE yourself"

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO=(sudo -n)
  else
    die "$NAME is not installed; run as root (or with passwordless sudo): apt-get install $PACKAGE"
  fi
fi

LOG="${SERVICES_LOG:-/tmp/queryapigate-services.log}"
echo "$ME: installing $PACKAGE (log: $LOG)" >&2
if ! "${SUDO[@]}" apt-get -o DPkg::Lock::Timeout=120 update >>"$LOG" 2>&1 ||
  ! "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=120 \
    install -y --no-install-recommends "$PACKAGE" >>"$LOG" 2>&1; then
  tail -n 20 "$LOG" >&2
  die "apt-get install $PACKAGE failed"
fi
command -v "$NAME" >/dev/null 2>&1 || die "$NAME still not on PATH after installing it"
