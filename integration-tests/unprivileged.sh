#!/usr/bin/env bash
# The jail's tests once more as an unprivileged user (uid 65534), as issue #19 asks: the
# jail must hold where sluice cannot be root (docs/jail.md, "As root and as an unprivileged
# user"). Run by .ci/run after the suite, as root.
#
# The test binaries and sluice are copied into a directory every user can read, laid out as
# target/<profile>/{sluice,deps/TEST} (where the tests look for sluice); the checkout itself
# may not be readable by that user. Skipped here, with the reason: the Go client test, which
# builds into the checkout's target/ (it runs as root in the suite).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v setpriv >/dev/null; then
  echo "unprivileged.sh: setpriv (util-linux) is missing" >&2
  exit 1
fi
if [ "$(id -u)" != 0 ]; then
  echo "unprivileged.sh: run it as root (it drops to uid 65534 itself)" >&2
  exit 1
fi

mapfile -t tests < <(cargo test -p sluice-integration-tests --no-run --message-format=json \
    --test jail --test launcher --test terminal --test launch_refusals 2>/dev/null \
  | python3 -c '
import json, sys
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["test"]:
        print(m["executable"])
')
[ ${#tests[@]} -eq 4 ] || { echo "unprivileged.sh: expected 4 test binaries, found ${#tests[@]}" >&2; exit 1; }

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/debug/deps"
cp target/debug/sluice "$scratch/debug/sluice"
for test in "${tests[@]}"; do cp "$test" "$scratch/debug/deps/"; done
chmod -R a+rX "$scratch"
work="$scratch/home"
mkdir -m 0700 "$work"
chown 65534:65534 "$work"

for test in "${tests[@]}"; do
  name="$(basename "$test")"
  echo "== $name as uid 65534"
  (cd "$work" && setpriv --reuid=65534 --regid=65534 --clear-groups \
    env -i PATH="/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin" HOME="$work" TMPDIR="$work" \
    "$scratch/debug/deps/$name" --test-threads=2 --skip a_go_client)
done
