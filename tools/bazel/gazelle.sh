#!/usr/bin/env bash
# Refreshes the project's BUILD.bazel files. gen/ is written by the generators (BUILD files included)
# and vendor/ by setup.sh, so neither is touched here.
#   tools/bazel/gazelle.sh          rewrite BUILD files
#   tools/bazel/gazelle.sh -check   exit 1 and print a diff when a BUILD file is out of date
set -euo pipefail
cd "$(dirname "$0")/../.."
GAZELLE_VERSION=v0.53.0
mode=fix
if [ "${1:-}" = "-check" ]; then mode=diff; fi
bash tools/bazel/setup.sh
dirs=()
for d in */; do
  d=${d%/}
  case "$d" in vendor | gen | tools | bazel-*) continue ;; esac
  dirs+=("$d")
done
for d in tools/*/; do
  d=${d%/}
  [ "$d" = tools/bazel ] || dirs+=("$d")
done
if ! go run -mod=mod "github.com/bazelbuild/bazel-gazelle/cmd/gazelle@$GAZELLE_VERSION" \
  -repo_root . -external=vendored -mode="$mode" "${dirs[@]}"; then
  echo "gazelle: BUILD files are out of date; run tools/bazel/gazelle.sh" >&2
  exit 1
fi
