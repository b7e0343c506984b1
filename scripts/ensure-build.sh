#!/usr/bin/env bash
# Builds dist/ for `npm start` unless it is up to date: `npm run build` writes dist/.build-stamp
# last, so a build that failed or was cut short leaves none. Rebuilt when any file or folder the
# build reads is newer than the stamp (a folder's time changes when a file in it is added, removed
# or renamed, so a deleted source is noticed too). `npm test` always builds afresh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
stamp=dist/.build-stamp
if [ -f "$stamp" ] && [ -z "$(find src workers bench test console tsconfig.json package.json package-lock.json -newer "$stamp" -print -quit 2>/dev/null)" ]; then
  echo "dist/ is up to date with the sources: not rebuilt" >&2
  exit 0
fi
echo "Building (tsc into dist/, about a minute on 2 cores)..." >&2
npm run build --silent
