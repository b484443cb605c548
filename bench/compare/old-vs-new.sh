#!/usr/bin/env bash
# Two builds of sluice-bench, interleaved, sluice only: the CPU sluice spends per request at
# h1-c16 and per new tunnel, for a change that must not cost any (docs/benchmarks.md,
# "Comparing two builds").
#
#   bench/compare/old-vs-new.sh OLD_BENCH_BINARY NEW_BENCH_BINARY [ROUNDS]
#
# Each round runs the old binary, then the new, with 3 s phases; the figures are read from
# each run's report. Build each binary from its own checkout and its own target directory
# (cargo reuses a path crate's artifacts across checkouts of one workspace).
set -euo pipefail
old=$1 new=$2 rounds=${3:-6}
out=$(mktemp -d)
for round in $(seq 1 "$rounds"); do
  for which in old new; do
    binary=$old; [ "$which" = new ] && binary=$new
    report="$out/$which-$round.md"
    "$binary" --only sluice --phases h1-c16,tunnels-c16 --phase-secs 3 --out "$report" >/dev/null
    req=$(grep -A5 "Small GETs, HTTP/1.1, 16" "$report" | awk -F'|' '/^\| sluice /{print $8}')
    tun=$(grep -A5 "New tunnels" "$report" | awk -F'|' '/^\| sluice /{print $8}')
    echo "round $round $which: CPU/request at h1-c16 $req | CPU/tunnel $tun"
  done
done
