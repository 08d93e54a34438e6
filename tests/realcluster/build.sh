#!/usr/bin/env bash
# Builds the real Kubernetes control plane the `realcluster` test tier runs:
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kubectl,
# from the Go module proxy at the release pinned in kubebuild/go.mod.
#
# Binaries are cached outside the repository, keyed by version:
#   ${XDG_CACHE_HOME:-~/.cache}/unstick/kube/<KUBE_VERSION>/bin
# A second run finds them and returns at once. UNSTICK_KUBE_BIN_DIR names a
# directory that already holds the five binaries and skips the build.
# Prints the directory holding the binaries on its last line of stdout.
set -euo pipefail
cd "$(dirname "$0")/kubebuild"

KUBE_VERSION=v1.35.4   # keep in step with kubebuild/go.mod and tests/realcluster/harness.py
ETCD_VERSION=v3.6.5    # the etcd release k8s.io/kubernetes v1.35.4's go.mod requires
BINARIES=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl)

have_all() {
  local dir=$1 b
  for b in "${BINARIES[@]}"; do
    [ -x "$dir/$b" ] || return 1
  done
}

if [ -n "${UNSTICK_KUBE_BIN_DIR:-}" ]; then
  if have_all "$UNSTICK_KUBE_BIN_DIR"; then
    echo "$UNSTICK_KUBE_BIN_DIR"
    exit 0
  fi
  echo "UNSTICK_KUBE_BIN_DIR=$UNSTICK_KUBE_BIN_DIR lacks one of: ${BINARIES[*]}" >&2
  exit 2
fi

CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/unstick/kube/$KUBE_VERSION
BIN=$CACHE/bin
if have_all "$BIN"; then
  echo "$BIN"
  exit 0
fi

if ! command -v go >/dev/null 2>&1; then
  echo "building the real control plane needs Go >= 1.25 (go not found on PATH)" >&2
  exit 2
fi

mkdir -p "$CACHE"
# One build at a time per version: concurrent runs (parallel test jobs on one
# machine) wait for the first and then find its binaries.
exec 9>"$CACHE/.build.lock"
if ! flock -n 9; then
  echo "==> another build of Kubernetes $KUBE_VERSION is running; waiting for it" >&2
  flock 9
fi
if have_all "$BIN"; then
  echo "$BIN"
  exit 0
fi
TMP=$(mktemp -d "$CACHE/bin.partial.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
start=$(date +%s)
echo "==> building Kubernetes $KUBE_VERSION and etcd $ETCD_VERSION into $BIN (slow the first time)" >&2

# The version stamps hack/lib/version.sh sets, so /version reports the release.
minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done
etcd_ldflags="-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=$ETCD_VERSION"

export GOFLAGS="-mod=mod -buildvcs=false -p=${UNSTICK_KUBE_BUILD_JOBS:-2}"
export CGO_ENABLED=0
nice -n 10 go build -trimpath -ldflags="$ldflags" -o "$TMP/" \
  k8s.io/kubernetes/cmd/kube-apiserver \
  k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kube-scheduler \
  k8s.io/kubernetes/cmd/kubectl
nice -n 10 go build -trimpath -ldflags="$etcd_ldflags" -o "$TMP/etcd" go.etcd.io/etcd/server/v3

rm -rf "$BIN"
mv "$TMP" "$BIN"
trap - EXIT
echo "==> built the control plane in $(( $(date +%s) - start )) s" >&2
echo "$BIN"
