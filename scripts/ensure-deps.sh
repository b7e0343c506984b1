#!/usr/bin/env bash
# Installs the npm dependencies when they are missing or older than package-lock.json, so
# `npm start`, `npm test` and `npm run lint` work on a fresh clone as the first command run.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
marker=node_modules/.package-lock.json
if [ ! -f "$marker" ] || [ package-lock.json -nt "$marker" ]; then
  echo "Installing the dependencies (npm ci; the first time takes a minute or two)..." >&2
  npm ci --no-audit --no-fund >&2
fi
