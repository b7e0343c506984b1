#!/usr/bin/env bash
# Runs the TPC-C bench against committed code, as the seeds do ("benchmark committed code: each build
# is a git archive of its ref"): a git archive of the ref (default HEAD) plus this folder's bench
# files, built in a temp folder with this checkout's node_modules; the results are copied back to
# bench/results/. The working tree's uncommitted changes are left out of the measurement.
#
#   bash bench/tpcc/run-committed.sh [--ref HEAD] [run.js arguments: --quick, --seconds 5, ...]
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
ref=HEAD
if [[ ${1:-} == --ref ]]; then ref=$2; shift 2; fi
sha=$(git -C "$repo" rev-parse --short "$ref")
dir=$(mktemp -d /tmp/qag-tpcc-build-XXXXXX)
trap 'rm -rf "$dir"' EXIT
git -C "$repo" archive "$sha" | tar -x -C "$dir"
mkdir -p "$dir/bench/tpcc"
cp "$repo"/bench/tpcc/*.ts "$dir/bench/tpcc/"
ln -s "$repo/node_modules" "$dir/node_modules"
(cd "$dir" && npx tsc -p .)
(cd "$dir" && QAG_BENCH_REF="$sha ($ref, built from git archive)" node dist/bench/tpcc/run.js "$@")
mkdir -p "$repo/bench/results"
for d in "$dir"/bench/results/tpcc-*/; do
  mkdir -p "$repo/bench/results/$(basename "$d")"
  cp "$d"* "$repo/bench/results/$(basename "$d")/"
done
echo "results copied to $repo/bench/results/" >&2
