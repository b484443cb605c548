#!/usr/bin/env bash
# The one command for sluice's benchmarks (docs/benchmarks.md):
#
#   bench/run.sh [sluice-bench flags...]
#
# Builds sluice-bench (and with it sluice) in release, builds the hudsucker peer in its own
# workspace and target directory (target/peers), installs mitmproxy's mitmdump into a
# virtual environment (target/bench/mitmproxy-venv, Python >= 3.12), waits a bounded time
# for the machine's load to settle, then runs every peer through every phase on loopback.
# A peer that cannot be built or installed is passed on as MISSING with the reason, and
# shows so in the report. The report lands in target/bench/report.md (and .json).
#
# Environment: SLUICE_BENCH_MAX_WAIT (seconds to wait for the 1-minute load to fall below
# SLUICE_BENCH_QUIET_LOAD; default 90 and 1.0).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
out="$root/target/bench"
mkdir -p "$out"
missing=()
peers=()

echo "== building sluice-bench (release)" >&2
cargo build --release -p sluice-bench

echo "== building the hudsucker peer (its own workspace, target/peers)" >&2
if cargo build --release \
    --manifest-path bench/peers/hudsucker/Cargo.toml \
    --target-dir "$root/target/peers" 2>"$out/hudsucker-build.log"; then
    peers+=(--hudsucker "$root/target/peers/release/sluice-bench-hudsucker")
else
    why="$(grep -m1 -E '^error' "$out/hudsucker-build.log" || tail -n1 "$out/hudsucker-build.log")"
    missing+=(--missing "hudsucker=cargo build failed: ${why}")
fi

echo "== installing mitmproxy (mitmdump) into a virtual environment" >&2
# mitmproxy 12 needs Python 3.12 or newer; look on PATH, then in pyenv's versions.
find_python() {
    local candidate
    for candidate in python3.14 python3.13 python3.12 python3 \
        "$HOME"/.pyenv/versions/3.1[2-9]*/bin/python3; do
        if command -v "$candidate" >/dev/null 2>&1 &&
            "$candidate" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' \
                >/dev/null 2>&1; then
            command -v "$candidate"
            return 0
        fi
    done
    return 1
}
venv="$out/mitmproxy-venv"
if [ -x "$venv/bin/mitmdump" ] && "$venv/bin/mitmdump" --version >/dev/null 2>&1; then
    peers+=(--mitmdump "$venv/bin/mitmdump")
elif python="$(find_python)"; then
    rm -rf "$venv"
    if "$python" -m venv "$venv" >"$out/mitmproxy-install.log" 2>&1 &&
        "$venv/bin/pip" install --quiet 'mitmproxy>=12,<13' >>"$out/mitmproxy-install.log" 2>&1 &&
        "$venv/bin/mitmdump" --version >/dev/null 2>&1; then
        peers+=(--mitmdump "$venv/bin/mitmdump")
    else
        why="$(grep -m1 -iE 'error' "$out/mitmproxy-install.log" || tail -n1 "$out/mitmproxy-install.log")"
        missing+=(--missing "mitmproxy=pip install into a $("$python" --version 2>&1) venv failed: ${why}")
    fi
else
    have="$(python3 --version 2>&1 || echo 'no python3')"
    missing+=(--missing "mitmproxy=needs Python >= 3.12; this machine has ${have} and no newer interpreter on PATH or in pyenv")
fi

# Measure on a quiet machine: wait (bounded) for the 1-minute load average to settle.
max_wait="${SLUICE_BENCH_MAX_WAIT:-90}"
quiet="${SLUICE_BENCH_QUIET_LOAD:-1.0}"
waited=0
while [ "$waited" -lt "$max_wait" ] &&
    awk -v q="$quiet" '{ exit !($1 > q) }' /proc/loadavg; do
    [ "$waited" -eq 0 ] && echo "== waiting up to ${max_wait}s for load < ${quiet} (now $(cut -d' ' -f1-3 /proc/loadavg))" >&2
    sleep 5
    waited=$((waited + 5))
done

echo "== measuring (load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
# Three rounds of 2-second phases, each figure the median over them (about six minutes); any
# flag given to this script comes later and wins.
timeout 1200 "$root/target/release/sluice-bench" \
    "${peers[@]}" "${missing[@]}" \
    --rounds 3 --phase-secs 2 \
    --out "$out/report.md" --json "$out/report.json" "$@"
