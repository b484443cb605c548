#!/usr/bin/env bash
# The README's test command: installs what the tests drive for real when it is missing,
# then runs every test (`cargo test --workspace`, any arguments passed on).
#
#   ./test.sh                   install what is missing, then run every test
#   ./test.sh --install-only    install what is missing, and stop
#
# Debian packages (apt-get) need root, or sudo for a user who has it: git, Node and npm,
# Python's venv, the JDK, slowhttptest, iproute2 and nftables (the jail), Prometheus, Go and
# AWS's Go SDK, Ruby, Mono, Chromium, GitHub's CLI, Squid; curl and openssl if a machine lacks them. Then, as the
# user: a Python venv at target/clients/venv (pinned PyPI clients) and the Node clients of
# integration-tests/node (npm ci). Each step is a no-op when its tool is already there, so a
# second run installs nothing. A test whose tool is still missing fails loudly, naming it;
# none is skipped.
set -euo pipefail
cd "$(dirname "$0")"

# apt-get as root, or through sudo.
apt_get() {
  if [ "$(id -u)" -eq 0 ]; then
    apt-get "$@"
  elif command -v sudo >/dev/null; then
    sudo DEBIAN_FRONTEND=noninteractive apt-get "$@"
  else
    echo "test.sh: installing Debian packages needs root or sudo (apt-get $*)" >&2
    exit 1
  fi
}

# Clients and tools the tests drive for real. curl (with HTTP/2) and openssl ship with the
# machine; install them if a machine ever comes without.
missing=()
command -v curl >/dev/null || missing+=(curl)
command -v openssl >/dev/null || missing+=(openssl)
if [ ${#missing[@]} -gt 0 ]; then
  apt_get update -qq
  DEBIAN_FRONTEND=noninteractive apt_get install -y -qq "${missing[@]}"
fi
curl --version | grep -q nghttp2 || { echo "curl lacks HTTP/2 (nghttp2); the tests need it" >&2; exit 1; }

# The client matrix (integration-tests/tests/clients.rs): git with http-backend, Node and npm,
# Python with venv. Each is installed from Debian's packages only when missing.
missing=()
command -v git >/dev/null || missing+=(git)
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
python3 -c 'import venv, ensurepip' 2>/dev/null || missing+=(python3 python3-venv)
# The JDK's HttpClient under the jail (integration-tests/tests/jail.rs), run from source.
command -v javac >/dev/null || missing+=(default-jdk-headless)
# Slow-header (slowloris) attacks against the listener: integration-tests/tests/abuse/slow.rs.
command -v slowhttptest >/dev/null || missing+=(slowhttptest)
# The jail (docs/jail.md): iproute2 sets up its loopback and routes, nftables its capture.
command -v ip >/dev/null || PATH="$PATH:/usr/sbin:/sbin" command -v ip >/dev/null || missing+=(iproute2)
PATH="$PATH:/usr/sbin:/sbin" command -v nft >/dev/null || missing+=(nftables)
# A real Prometheus scraping the admin endpoint, and promtool linting its page
# (integration-tests/tests/operations.rs).
command -v prometheus >/dev/null && command -v promtool >/dev/null || missing+=(prometheus)
# AWS's Go SDK v2 as a signing client (integration-tests/go, tests/aws_signing.rs), built
# against Debian's packaged Go libraries: no Go module proxy is reachable here.
command -v go >/dev/null || missing+=(golang-go)
[ -d /usr/share/gocode/src/github.com/aws/aws-sdk-go-v2/service/s3 ] || missing+=(golang-github-aws-aws-sdk-go-v2-dev)
# Ruby's Net::HTTP and .NET's HttpClient on Mono under the jail (integration-tests/tests/jail.rs);
# ca-certificates-mono fills the trust directory Mono's TLS reads.
command -v ruby >/dev/null || missing+=(ruby)
command -v mcs >/dev/null || missing+=(mono-mcs)
command -v mono >/dev/null || missing+=(mono-runtime)
[ -f /usr/lib/mono/4.5/System.Net.Http.dll ] || missing+=(libmono-system-net-http4.0-cil)
[ -d /usr/share/.mono/new-certs/Trust ] || missing+=(ca-certificates-mono)
# GitHub's CLI with a GitHub App's placeholder (integration-tests/tests/github_app.rs).
command -v gh >/dev/null || missing+=(gh)
# Squid as the organisation's egress proxy (integration-tests/tests/upstream_proxy.rs).
[ -x /usr/sbin/squid ] || missing+=(squid)
# Headless Chromium renders the reviewers' report (integration-tests/tests/audit_report.rs).
command -v chromium >/dev/null || missing+=(chromium)
if [ ${#missing[@]} -gt 0 ]; then
  apt_get update -qq
  DEBIAN_FRONTEND=noninteractive apt_get install -y -qq "${missing[@]}"
fi
[ -x "$(git --exec-path)/git-http-backend" ] || { echo "git lacks http-backend; the git client test needs it" >&2; exit 1; }
# Python clients (and the gRPC test upstream; boto3, the AWS CLI and botocore's signer for the
# signing tests, integration-tests/tests/aws_signing.rs; websockets for the WebSocket echo server and
# client, integration-tests/tests/websocket.rs; google-auth and requests-oauthlib refreshing
# OAuth tokens by themselves through sluice and finding the metadata server,
# integration-tests/tests/minted.rs and minted_google.rs) in a venv the tests find at
# target/clients/venv (pinned; a no-op when present).
clients_venv=target/clients/venv
[ -x "$clients_venv/bin/python" ] || python3 -m venv "$clients_venv"
"$clients_venv/bin/python" -m pip install -q --disable-pip-version-check 'requests==2.34.2' 'httpx==0.28.1' 'grpcio==1.76.0' \
  'boto3==1.43.11' 'awscli==1.45.11' \
  'websockets==15.0.1' \
  'google-auth==2.40.3' 'requests-oauthlib==2.0.0'
# Node clients: undici, AWS's JS SDK v3 and Octokit from the committed lock file (again
# only when the lock file changed since the last install).
node_lock=integration-tests/node/node_modules/.package-lock.json
[ "$node_lock" -nt integration-tests/node/package-lock.json ] ||
  (cd integration-tests/node && npm ci --no-audit --no-fund --loglevel=error)

[ "${1:-}" = --install-only ] && exit 0

cargo test --workspace "$@"
