#!/usr/bin/env bash
# Make sure `haproxy` (the load balancer the scale-out test and bench put in front of the gateways) is installed.
# Idempotent and silent when it already is; otherwise installs the Debian package (scripts/ensure-deb.sh).
set -euo pipefail
exec "$(dirname "${BASH_SOURCE[0]}")/ensure-deb.sh" haproxy
