#!/usr/bin/env bash
# `bazel run //parity:update`: re-runs every generated golden test with -update, so goldie rewrites
# the golden files in the source tree (the tests write under $BUILD_WORKSPACE_DIRECTORY). Review the
# diff before committing.
set -euo pipefail
if [ -z "${BUILD_WORKSPACE_DIRECTORY:-}" ]; then
  echo "update: run me with bazel run //parity:update" >&2
  exit 2
fi
for t in "$@"; do
  echo "update: $t"
  "$t" -test.run '^TestGolden' -update
done
echo "update: done; review with git diff parity/goldens/go"
