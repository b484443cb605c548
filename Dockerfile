# syntax=docker/dockerfile:1
#
# The sluice proxy image: `sluice serve` as a non-root user, the run directory as a volume.
#
#   docker build -t sluice .
#   podman build --format docker -t sluice .   # podman/buildah: Docker's format keeps the
#                                              # HEALTHCHECK (the OCI format drops it)
#   docker run --rm -p 3128:3128 -e GITHUB_TOKEN \
#     -v "$PWD/policy.yaml:/etc/sluice/policy.yaml:ro" -v sluice-run:/run/sluice sluice
#
# The sandbox needs three files from the run directory: ca.pem (trust), proxy-url (the
# proxy with this run's credentials, 0600) and placeholders.env. See docs/kubernetes.md.
#
# CI builds this file unchanged and runs the image, and the pod of docs/kubernetes.md, with
# deploy/image-test.sh (podman, with stand-in base images: no registry is reachable there).

# ---- build: the release binary, from the locked dependency graph -------------------------
FROM rust:1-bookworm AS build
# busybox-static: one static binary, used only by HEALTHCHECK
# (distroless itself has no shell).
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends busybox-static \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# /out is the final image's tree (the binary, busybox, /etc/sluice); /run-sluice becomes the
# run directory, mode 0700 as sluice wants it.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p sluice \
 && install -D -m 0755 target/release/sluice /out/usr/local/bin/sluice \
 && install -D -m 0755 /bin/busybox /out/usr/local/bin/busybox \
 && install -d -m 0700 /run-sluice \
 && install -d -m 0755 /out/etc/sluice

# ---- run: distroless (glibc + libgcc for the binary, CA roots, no shell), non-root ---------
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/ /
# COPY resets ownership to root; the run directory must belong to `nonroot` (65532). (sluice
# also makes it 0700 at every start.)
COPY --from=build --chown=65532:65532 /run-sluice /run/sluice
USER 65532:65532
# Secrets are read from the environment or files named by the policy at start; nothing is
# written but the run directory (ca.pem, proxy-url, placeholders.env, audit.jsonl).
VOLUME ["/run/sluice"]
EXPOSE 3128
# SIGTERM (docker stop) drains in-flight requests, flushes the audit log and exits 0 within
# the drain timeout (10 s); give `docker stop -t` at least that.
STOPSIGNAL SIGTERM
# A TCP check: the listener accepts. (Kubernetes ignores HEALTHCHECK; use a tcpSocket probe.)
HEALTHCHECK --interval=30s --timeout=5s --start-period=5s --retries=3 \
  CMD ["/usr/local/bin/busybox", "sh", "-c", "exec /usr/local/bin/busybox nc -w 3 127.0.0.1 3128 </dev/null"]
ENTRYPOINT ["/usr/local/bin/sluice"]
# Listening on every address of the container, `proxy-url` names 127.0.0.1:3128: the pod's
# loopback, which a sidecar's neighbours share (`--advertise HOST` names another).
CMD ["serve", "--policy", "/etc/sluice/policy.yaml", "--listen", "0.0.0.0:3128", "--run-dir", "/run/sluice"]
