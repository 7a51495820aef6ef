#!/usr/bin/env bash
# Every install step for building and testing on a fresh Debian machine, offline except for
# Debian's packages and the Go module proxy. Idempotent: a second run does nothing slow.
#   - Debian: Bazel 4.2.3 (bazel-bootstrap) and its rule packages, protoc, ZooKeeper (for tests).
#   - rules_go v0.34.0 from the Go module proxy, patched for Go >= 1.20 (.bazel-deps/rules_go).
#   - a copy of the host Go SDK with a precompiled std (.bazel-deps/go-sdk).
#   - vendor/ (go mod vendor) and its gazelle-generated BUILD files.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
deps="$root/.bazel-deps"
RULES_GO_VERSION=v0.34.0
GAZELLE_VERSION=v0.53.0
APT_PACKAGES=(bazel-bootstrap bazel-skylib bazel-platforms bazel-rules-java bazel-rules-proto
  protobuf-compiler zookeeper chromium)

# Progress: each step prints what it does and how long it took (stderr).
t_all=$SECONDS
step_name=""
t_step=0
step() {
  step_done
  step_name="$1"
  t_step=$SECONDS
  echo "setup: $step_name ..." >&2
}
step_done() {
  if [ -n "$step_name" ]; then
    echo "setup: $step_name: done in $((SECONDS - t_step)) s" >&2
  fi
  step_name=""
}

# Go is the one prerequisite this script does not install (Debian's is too old): it must be on
# PATH and at least the go.mod's version.
step "checking Go"
need_go=$(sed -n 's/^go \([0-9][0-9.]*\)$/\1/p' "$root/go.mod")
if ! command -v go >/dev/null 2>&1; then
  echo "setup: go not found on PATH; install Go >= $need_go from https://go.dev/dl/ (e.g. into /usr/local/go) and add its bin/ to PATH" >&2
  exit 1
fi
have_go=$(go env GOVERSION | sed 's/^go//')
if [ "$(printf '%s\n%s\n' "$need_go" "$have_go" | sort -V | head -n1)" != "$need_go" ]; then
  echo "setup: go $have_go at $(command -v go) is older than go.mod's $need_go; install Go >= $need_go" >&2
  exit 1
fi
echo "setup: go $have_go at $(command -v go)" >&2

step "checking Debian packages (${APT_PACKAGES[*]})"
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
mkdir -p "$deps"

step "rules_go $RULES_GO_VERSION (Go module proxy, patched for Go >= 1.20)"
if [ "$(cat "$deps/rules_go.stamp" 2>/dev/null)" != "$RULES_GO_VERSION" ]; then
  dir=$(cd / && GOFLAGS=-mod=mod go mod download -json "github.com/bazelbuild/rules_go@$RULES_GO_VERSION" |
        sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  rm -rf "$deps/rules_go"
  cp -r "$dir" "$deps/rules_go"
  chmod -R u+w "$deps/rules_go"
  patch -s -d "$deps/rules_go" -p1 < "$root/tools/bazel/rules_go-$RULES_GO_VERSION-offline.patch"
  echo "$RULES_GO_VERSION" > "$deps/rules_go.stamp"
fi

gover=$(go env GOVERSION)
step "Go SDK copy with a precompiled std ($gover)"
if [ "$(cat "$deps/go-sdk.stamp" 2>/dev/null)" != "$gover" ]; then
  rm -rf "$deps/go-sdk"
  cp -a "$(go env GOROOT)" "$deps/go-sdk"
  (
    cd "$deps/go-sdk"
    export GOROOT="$PWD" GOTOOLCHAIN=local GOFLAGS= CGO_ENABLED=1
    # rules_go v0.34 expects pkg/<os>_<arch>/*.a and pkg/tool/.../pack.
    GODEBUG=installgoroot=all ./bin/go install std runtime/cgo
    ./bin/go build -o "pkg/tool/$(./bin/go env GOHOSTOS)_$(./bin/go env GOHOSTARCH)/pack" cmd/pack
  )
  echo "$gover" > "$deps/go-sdk.stamp"
fi

# vendor/ and its BUILD files. go mod vendor copies only the packages the code imports, so it runs
# every time (about a second; unchanged files keep their content, so Bazel's cache stays valid).
cd "$root"
step "Go modules: download and vendor/"
go mod download
go mod vendor
step "vendor/ BUILD files (gazelle $GAZELLE_VERSION)"
go run -mod=mod "github.com/bazelbuild/bazel-gazelle/cmd/gazelle@$GAZELLE_VERSION" \
  -repo_root . -external=vendored vendor
# Gazelle $GAZELLE_VERSION predates some standard packages (weak, Go 1.24, which
# klauspost/compress imports) and takes them for vendored ones: drop the deps on vendor packages
# that do not exist (the Go SDK provides them).
for label in $(grep -rhoE '"//vendor/[^":]+"' vendor --include=BUILD.bazel | sort -u | tr -d '"'); do
  if [ ! -d "${label#//}" ]; then
    grep -rlF "\"$label\"" vendor --include=BUILD.bazel | xargs sed -i "\#\"$label\",#d"
  fi
done
step_done
echo "setup: all done in $((SECONDS - t_all)) s" >&2
