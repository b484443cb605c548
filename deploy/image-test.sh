#!/usr/bin/env bash
# The container image, built and run for real (issue #43): the repository's Dockerfile
# built unchanged by podman, then the image tested as docs/kubernetes.md deploys it.
#
#   deploy/image-test.sh                 install what is missing, build, test
#   deploy/image-test.sh --fresh         make the stand-in base images again first
#
# A second run keeps the stand-in images and podman's build cache (the cargo registry and
# target directory of the Dockerfile's cache mounts), so only what changed is rebuilt.
#
# Run by .ci/run, and by hand as root on a Debian 12 machine. Each step is named as it
# starts; a failing step stops the script with its name.
#
# No container registry is reachable from the machines this runs on, so the Dockerfile's two
# base images are STAND-INS made here from Debian's own packages and tagged with the names
# the Dockerfile uses:
#   docker.io/library/rust:1-bookworm          bookworm (mmdebstrap) + this machine's Rust
#   gcr.io/distroless/cc-debian12:nonroot      the .debs distroless is made of, unpacked:
#                                              glibc, libgcc, libssl, CA roots, tzdata,
#                                              users root/nobody/nonroot; no shell
# They carry the label sluice.stand-in=true. A real build pulls the real ones; what differs
# is written in docs/kubernetes.md ("The image, tested").
#
# The tests themselves are integration-tests/tests/image.rs (real hyper upstreams on the
# host's loopback, reached from the containers as 10.0.2.2 through slirp4netns). The build
# needs the network the README's install does: Debian's mirror (mmdebstrap, apt-get
# download, the Dockerfile's busybox-static) and crates.io (the Dockerfile's cargo build).
set -euo pipefail
cd "$(dirname "$0")/.."

fresh=false
for arg in "$@"; do
  case "$arg" in
    --fresh) fresh=true ;;
    *) echo "image-test: unknown argument $arg (known: --fresh)" >&2; exit 2 ;;
  esac
done

step_name="(start)"
step() {
  step_name="$1"
  echo "==> image-test: $1 ($(date +%T))"
}
trap 'echo "image-test: FAILED at step: $step_name" >&2' ERR

[ "$(id -u)" -eq 0 ] || { echo "image-test: run as root (podman's storage, nftables in the pod)" >&2; exit 1; }

IMAGE=localhost/sluice:image-test
BUILD_BASE=docker.io/library/rust:1-bookworm
RUNTIME_BASE=gcr.io/distroless/cc-debian12:nonroot
# The pod's capture init container and its sandbox need sh, curl and nft: the build
# stand-in has them, under a name of its own so that no reader takes it for Rust's image.
TOOLS=localhost/sluice-image-test/tools:bookworm
SUITE=bookworm
MIRROR="deb http://deb.debian.org/debian $SUITE main"

step "install podman, buildah, mmdebstrap when missing"
missing=()
command -v podman >/dev/null || missing+=(podman)
command -v buildah >/dev/null || missing+=(buildah)
command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
command -v newuidmap >/dev/null || missing+=(uidmap)
command -v runc >/dev/null || missing+=(runc)
command -v slirp4netns >/dev/null || missing+=(slirp4netns)
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

scratch="$(mktemp -d /var/tmp/sluice-image-test.XXXXXX)"
# What the tests made is removed by them; if they were killed, here.
leftovers() {
  podman pod ls -q --filter name=sluice-it- | xargs -r podman pod rm -f -t 0 >/dev/null 2>&1 || true
  podman ps -aq --filter name=sluice-it- | xargs -r podman rm -f -t 0 >/dev/null 2>&1 || true
  podman volume ls -q --filter name=sluice-it- | xargs -r podman volume rm -f >/dev/null 2>&1 || true
}
trap 'leftovers; rm -rf "$scratch"' EXIT

step "host settings for podman (CONTAINERS_CONF, this run only)"
# Root here cannot raise its own limits, and crun refuses this kernel's hybrid cgroups:
# host facts for these machines, not the product's (../shared/notes/podman.md). Given to
# podman for this script's run only; the machine's own containers.conf is left alone.
cat >"$scratch/containers.conf" <<'EOF'
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
[engine]
runtime = "runc"
EOF
export CONTAINERS_CONF="$scratch/containers.conf"

have_image() { podman image exists "$1" && ! $fresh; }

if have_image "$BUILD_BASE" && have_image "$TOOLS"; then
  step "stand-in build image: kept from an earlier run ($BUILD_BASE)"
else
  step "stand-in build image from Debian's packages, tagged $BUILD_BASE"
  echo "    STAND-IN: not Docker Hub's rust:1-bookworm, which no registry here serves"
  sysroot="$(rustc --print sysroot)"
  # This network's TLS goes through a proxy whose CA the machine trusts: the build image
  # must trust it too to fetch crates.
  mmdebstrap --quiet --variant=apt --format=tar \
    --include=build-essential,pkg-config,ca-certificates,curl,git,perl,nftables \
    --customize-hook='copy-in /usr/local/share/ca-certificates /usr/local/share' \
    --customize-hook='chroot "$1" update-ca-certificates >/dev/null' \
    --customize-hook='mkdir -p "$1/usr/local/rustup/toolchains" "$1/usr/local/cargo/bin"' \
    --customize-hook="copy-in $sysroot /usr/local/rustup/toolchains" \
    --customize-hook="for tool in cargo rustc rustdoc; do ln -s ../../rustup/toolchains/$(basename "$sysroot")/bin/\$tool \"\$1/usr/local/cargo/bin/\$tool\"; done" \
    "$SUITE" "$scratch/build.tar" "$MIRROR"
  podman import --quiet \
    --change 'ENV=RUSTUP_HOME=/usr/local/rustup' \
    --change 'ENV=CARGO_HOME=/usr/local/cargo' \
    --change 'ENV=PATH=/usr/local/cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'LABEL=sluice.stand-in=true' \
    --change 'CMD=["/bin/sh"]' \
    "$scratch/build.tar" "$BUILD_BASE" >/dev/null
  podman tag "$BUILD_BASE" "$TOOLS"
  rm -f "$scratch/build.tar"
  podman run --rm "$BUILD_BASE" cargo --version
fi

if have_image "$RUNTIME_BASE"; then
  step "stand-in runtime image: kept from an earlier run ($RUNTIME_BASE)"
else
  step "stand-in runtime image from distroless's .debs, tagged $RUNTIME_BASE"
  echo "    STAND-IN: not gcr.io's distroless, which no registry here serves"
  debs="$scratch/debs" root="$scratch/root"
  mkdir -p "$debs" "$root"
  chown _apt "$debs" 2>/dev/null || true
  runtime_debs=(libc6 libgcc-s1 libssl3 ca-certificates tzdata base-files netbase)
  (cd "$debs" && { apt-get download -qq "${runtime_debs[@]}" 2>/dev/null \
    || { apt-get update -qq && apt-get download -qq "${runtime_debs[@]}"; }; })
  for dir in bin lib lib64 sbin; do mkdir -p "$root/usr/$dir"; ln -s "usr/$dir" "$root/$dir"; done
  for deb in "$debs"/*.deb; do
    dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$root" --keep-directory-symlink
  done
  # ca-certificates' maintainer script makes the bundle; there is no dpkg to run it.
  mkdir -p "$root/etc/ssl/certs"
  cat "$root"/usr/share/ca-certificates/mozilla/*.crt >"$root/etc/ssl/certs/ca-certificates.crt"
  printf '%s\n' 'root:x:0:0:root:/root:/sbin/nologin' \
    'nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin' \
    'nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin' >"$root/etc/passwd"
  printf '%s\n' 'root:x:0:' 'nobody:x:65534:' 'tty:x:5:' 'staff:x:50:' 'nonroot:x:65532:' >"$root/etc/group"
  install -d -m 0700 "$root/root"
  install -d -m 0700 -o 65532 -g 65532 "$root/home/nonroot"
  install -d -m 1777 "$root/tmp"
  tar -C "$root" -c . | podman import --quiet \
    --change 'USER=65532' \
    --change 'WORKDIR=/home/nonroot' \
    --change 'ENV=PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV=SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt' \
    --change 'LABEL=sluice.stand-in=true' \
    - "$RUNTIME_BASE" >/dev/null
  # 127: the runtime found no such program (another failure would prove nothing).
  status=0
  podman run --rm --entrypoint /bin/sh "$RUNTIME_BASE" -c true 2>/dev/null || status=$?
  if [ "$status" -ne 127 ]; then
    echo "image-test: the runtime stand-in has a shell, or would not run ($status); distroless has none" >&2
    false
  fi
fi

step "build the Dockerfile, unchanged (podman build --format docker)"
started=$(date +%s)
# Docker's format keeps HEALTHCHECK (the OCI format has no field for it).
podman build --quiet --pull=never --format docker -t "$IMAGE" . >/dev/null
echo "    built in $(($(date +%s) - started)) s; $(podman image inspect --format '{{.Size}}' "$IMAGE" | awk '{printf "%.1f MB", $1/1e6}')"

step "the image's tests (integration-tests/tests/image.rs)"
SLUICE_IMAGE="$IMAGE" SLUICE_IMAGE_TOOLS="$TOOLS" \
  cargo test --quiet -p sluice-integration-tests --test image -- --ignored --test-threads=1

step "done"
