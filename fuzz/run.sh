#!/usr/bin/env bash
# Builds sluice's cargo-fuzz targets and runs each for a bounded time; exits non-zero on the
# first crash, leak or timeout, naming the input that caused it.
#
#   fuzz/run.sh [SECONDS]          build every target, then run each for SECONDS (default 20)
#   fuzz/run.sh build              build only
#   fuzz/run.sh run [SECONDS]      run only (the targets must be built)
#
# Environment:
#   FUZZ_TARGETS    space-separated subset of the targets below (default: all)
#   FUZZ_PROFILE    dev (default: quickest to build, as CI wants) or release (optimised, for
#                   long runs); both keep debug assertions and overflow checks
#   FUZZ_SANITIZER  none (default) or address. sluice forbids unsafe code, so AddressSanitizer
#                   only watches dependencies; it needs -Zsanitizer, which this script allows
#                   on the stable toolchain with RUSTC_BOOTSTRAP=1.
#
# Builds go to target/fuzz/<sanitizer>/ and are reused. Inputs that found new coverage go to
# target/fuzz/corpus/<target>/ (the committed seeds in <crate>/fuzz/seeds/<target>/ are read,
# never written); a crashing input goes to target/fuzz/artifacts/<target>/.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

cargo_fuzz_version=0.13.2
# crate folder:target
all_targets=(guard:rewrite_stream_equivalence policies:policy_parse proxy:outbound_rewrite proxy:token_exchange sign:sigv4_resign)

profile=${FUZZ_PROFILE:-dev}
sanitizer=${FUZZ_SANITIZER:-none}
target_dir=$root/target/fuzz/$sanitizer
triple=$(rustc -vV | sed -n 's/^host: //p')

case $profile in
  dev) profile_flag=--dev; out=$target_dir/$triple/debug ;;
  # cargo-fuzz's default: optimised, with debug assertions and overflow checks kept.
  release) profile_flag=--debug-assertions; out=$target_dir/$triple/release ;;
  *) echo "FUZZ_PROFILE is dev or release, not $profile" >&2; exit 2 ;;
esac
case $sanitizer in
  none) ;;
  address) export RUSTC_BOOTSTRAP=1 ;;
  *) echo "FUZZ_SANITIZER is none or address, not $sanitizer" >&2; exit 2 ;;
esac
# Line tables are enough for a crash's backtrace, and keep dev builds quick.
export CARGO_PROFILE_DEV_DEBUG=line-tables-only

selected=()
for entry in "${all_targets[@]}"; do
  if [ -z "${FUZZ_TARGETS:-}" ] || [[ " $FUZZ_TARGETS " == *" ${entry#*:} "* ]]; then
    selected+=("$entry")
  fi
done
[ ${#selected[@]} -gt 0 ] || { echo "no target matches FUZZ_TARGETS=$FUZZ_TARGETS" >&2; exit 2; }

build() {
  if [ "$(cargo fuzz --version 2>/dev/null)" != "cargo-fuzz $cargo_fuzz_version" ]; then
    cargo install --locked cargo-fuzz --version "$cargo_fuzz_version"
  fi
  for entry in "${selected[@]}"; do
    (cd "$root/${entry%%:*}" &&
      cargo fuzz build "$profile_flag" --sanitizer "$sanitizer" --target-dir "$target_dir" \
        "${entry#*:}")
  done
}

run() {
  local seconds=$1
  for entry in "${selected[@]}"; do
    local crate=${entry%%:*} name=${entry#*:}
    local corpus=$root/target/fuzz/corpus/$name artifacts=$root/target/fuzz/artifacts/$name
    local dict=$root/$crate/fuzz/$name.dict
    mkdir -p "$corpus" "$artifacts"
    local args=(-max_total_time="$seconds" -timeout=20 -print_final_stats=1 -print_funcs=0
      -artifact_prefix="$artifacts/")
    [ -f "$dict" ] && args+=(-dict="$dict")
    echo "fuzz: $name for ${seconds}s"
    # One process on one core: libFuzzer's default (-jobs would only add a log file).
    if ! "$out/$name" "${args[@]}" "$corpus" "$root/$crate/fuzz/seeds/$name"; then
      echo "fuzz: $name FAILED; the input is in $artifacts/" >&2
      ls -t "$artifacts" | head -n 3 >&2
      echo "replay: $out/$name $artifacts/<file>" >&2
      return 1
    fi
  done
}

case ${1:-} in
  build) build ;;
  run) run "${2:-20}" ;;
  '' | [0-9]*) build; run "${1:-20}" ;;
  *) echo "usage: fuzz/run.sh [SECONDS] | build | run [SECONDS]" >&2; exit 2 ;;
esac
