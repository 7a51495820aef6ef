#!/usr/bin/env bash
# The README's `bazel run //cmd:agent`: the alias resolves, the binary runs with no flags (built-in
# example config) and exits 0, and --help lists the generated flags.
set -euo pipefail
agent="$1"
out=$("$agent")
grep -q "agent configuration from built-in example" <<<"$out" || { echo "no example config output:"; echo "$out"; exit 1; }
grep -q "ps (gRPC port" <<<"$out" || { echo "no PS command line:"; echo "$out"; exit 1; }
help=$("$agent" --help)
for flag in --conf=PATH --tfs_log=PATH; do
  grep -q -- "$flag" <<<"$help" || { echo "--help lacks $flag:"; echo "$help"; exit 1; }
done
if "$agent" --no-such-flag 2>/dev/null; then echo "a bad flag must fail"; exit 1; else code=$?; fi
[ "$code" = 2 ] || { echo "bad flag exit status $code, want 2"; exit 1; }
echo "1 passed, 0 failed"
