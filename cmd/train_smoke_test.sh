#!/usr/bin/env bash
# The README's `bazel run //cmd:train`: with no flags (but a small --max_steps) the binary trains its
# demo (a generated click log, nothing installed) into a new temporary model dir it prints, and ends
# with "best auc=<b> loss=<l>" and "eval auc=<x> loss=<y> steps=<n>". A second run with that
# --model_dir restores the last checkpoint and the global step goes on. Also: progress lines on
# stderr, exit status 2 with one line for a bad flag and for missing data. Every run is bounded by
# timeout, so the test cannot hang.
set -euo pipefail
train="$1"
out="$(mktemp)"
err="$(mktemp)"
model_dir=""
cleanup() { rm -f "$out" "$err"; if [ -n "$model_dir" ]; then rm -rf "$model_dir"; fi; }
trap cleanup EXIT
fail() { echo "$1"; echo "--- stdout:"; cat "$out"; echo "--- stderr:"; tail -n 20 "$err"; exit 1; }

if ! timeout 120 "$train" --max_steps=30 >"$out" 2>"$err"; then fail "the first run failed"; fi
final='^eval auc=[01]\.[0-9]{4} loss=[0-9]+\.[0-9]{4} steps='
best='^best auc=[01]\.[0-9]{4} loss=[0-9]+\.[0-9]{4}$'
tail -n 1 "$out" | grep -Eq "${final}30\$" || fail "the first run's last line is not 'eval auc=<x> loss=<y> steps=30'"
tail -n 2 "$out" | head -n 1 | grep -Eq "$best" || fail "no 'best auc=<b> loss=<l>' line before the last"
grep -q 'msg="training progress" step=1 loss=' "$err" || fail "no progress line on stderr"
model_dir=$(grep -o -- '--model_dir=[^ ]*' "$out" | head -n 1 | cut -d= -f2-)
[ -n "$model_dir" ] && [ -f "$model_dir/checkpoint" ] || fail "no model dir with a checkpoint state printed"

if ! timeout 120 "$train" --max_steps=50 --model_dir="$model_dir" >"$out" 2>"$err"; then fail "the second run failed"; fi
tail -n 1 "$out" | grep -Eq "${final}50\$" || fail "the second run's last line is not 'eval auc=<x> loss=<y> steps=50'"
grep -q "msg=\"restored checkpoint\" checkpoint=$model_dir/model.ckpt-30 global_step=30" "$err" ||
  fail "the second run did not restore model.ckpt-30"

for args in "--no-such-flag" "--train_data=/nonexistent/train-*.tfrecord --eval_data=/nonexistent/eval"; do
  # shellcheck disable=SC2086 # the arguments are split on purpose
  if timeout 60 "$train" $args >"$out" 2>"$err"; then fail "'$args' must fail"; else code=$?; fi
  [ "$code" = 2 ] || fail "'$args': exit status $code, want 2"
  [ "$(grep -c '^train: ' "$err")" = 1 ] || fail "'$args': want one 'train: ...' line on stderr"
done
echo "1 passed, 0 failed"
