#!/usr/bin/env bash
# Make sure `wrk` (the HTTP load generator bench/load.ts drives) is installed.
# Idempotent and silent when it already is; otherwise installs the Debian package (scripts/ensure-deb.sh).
set -euo pipefail
exec "$(dirname "${BASH_SOURCE[0]}")/ensure-deb.sh" wrk
