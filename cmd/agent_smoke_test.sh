#!/usr/bin/env bash
# The README's `bazel run //cmd:agent`: with no flags the binary runs its embedded demo (in-process
# ZooKeeper and model server, nothing installed; the model trained for a few seconds into its cache
# directory). --exit_after stops it, and every wait is bounded, so the test cannot hang. Checks the
# demo's guide, its status endpoint (/healthz, /status over bash's /dev/tcp: no curl needed), its
# clean exit, that a second run serves the cached model, --help's flags, and exit status 2 for a bad
# flag.
set -euo pipefail
agent="$1"
out="$(mktemp)"
cache="$(mktemp -d)"
trap 'rm -rf "$out" "$cache"' EXIT
export XDG_CACHE_HOME="$cache"

timeout 50 "$agent" --exit_after=10s >"$out" 2>&1 &
pid=$!
url=""
for _ in $(seq 400); do
  url=$(grep -o 'status endpoint  http://[0-9.]*:[0-9]*' "$out" | grep -o 'http://.*' || true)
  [ -n "$url" ] && break
  sleep 0.05
done
[ -n "$url" ] || { echo "no status endpoint in the demo's output:"; cat "$out"; exit 1; }
hostport=${url#http://}
get() { # get PATH: the body of an HTTP/1.0 GET
  exec 3<>"/dev/tcp/${hostport%:*}/${hostport#*:}"
  printf 'GET %s HTTP/1.0\r\nHost: %s\r\n\r\n' "$1" "$hostport" >&3
  sed '1,/^\r$/d' <&3
  exec 3>&-
}
[ "$(get /healthz)" = "ok" ] || { echo "/healthz is not ok"; exit 1; }
# (The body goes to a variable first: with pipefail, grep -q quitting early would fail the pipe.)
status=$(get /status)
grep -q '"path": "/demo/layouts/demo_layout"' <<<"$status" || { echo "/status lacks the layout:"; echo "$status"; exit 1; }
if wait "$pid"; then :; else echo "the demo exited with status $?:"; cat "$out"; exit 1; fi
for want in "Demo model: trained" "Monolith agent demo" "layout /demo/layouts/demo_layout lists demo_model:entry" \
  "--model_name=demo_model:entry --input_type=example_batch --model_spec=$cache/" "Press Ctrl-C to stop." \
  "agent stopped (--exit_after 10s elapsed)"; do
  grep -qF -- "$want" "$out" || { echo "the demo's output lacks '$want':"; cat "$out"; exit 1; }
done

# A second run serves the model the first one trained.
timeout 50 "$agent" --exit_after=3s >"$out" 2>&1 || { echo "the second demo run failed:"; cat "$out"; exit 1; }
for want in "Demo model: the export of an earlier run" "Press Ctrl-C to stop." "agent stopped (--exit_after 3s elapsed)"; do
  grep -qF -- "$want" "$out" || { echo "the second run's output lacks '$want':"; cat "$out"; exit 1; }
done

help=$("$agent" --help)
for flag in --conf=PATH --tfs_log=PATH --status_addr= --exit_after= --log_level=; do
  grep -q -- "$flag" <<<"$help" || { echo "--help lacks $flag:"; echo "$help"; exit 1; }
done
if "$agent" --no-such-flag 2>/dev/null; then echo "a bad flag must fail"; exit 1; else code=$?; fi
[ "$code" = 2 ] || { echo "bad flag exit status $code, want 2"; exit 1; }
echo "1 passed, 0 failed"
