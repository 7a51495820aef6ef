#!/usr/bin/env bash
# The README's `bazel run //cmd:train`: with no flags (but a small --max_steps) the binary trains its
# demo (a generated click log, nothing installed) in an in-process cluster of 2 parameter servers on
# loopback gRPC and one worker, into a new temporary model dir it prints; it prints progress lines
# and the throughput with its time split, and ends with "best auc=<b> loss=<l>" and
# "eval auc=<x> best auc=<b> loss=<y> steps=<n>". The checkpoint holds the dense files and the
# tables' dump. A second run with that --model_dir restores the last checkpoint (tables included)
# and the global step goes on. Also: exit status 2 with one line for a bad flag and for missing
# data. Every run is bounded by timeout, so the test cannot hang.
set -euo pipefail
train="$1"
out="$(mktemp)"
err="$(mktemp)"
model_dir=""
cleanup() { rm -f "$out" "$err"; if [ -n "$model_dir" ]; then rm -rf "$model_dir"; fi; }
trap cleanup EXIT
fail() { echo "$1"; echo "--- stdout:"; cat "$out"; echo "--- stderr:"; tail -n 20 "$err"; exit 1; }

if ! timeout 120 "$train" --max_steps=30 --log_step_count_steps=10 >"$out" 2>"$err"; then fail "the first run failed"; fi
final='^eval auc=[01]\.[0-9]{4} best auc=[01]\.[0-9]{4} loss=[0-9]+\.[0-9]{4} steps='
best='^best auc=[01]\.[0-9]{4} loss=[0-9]+\.[0-9]{4}$'
tail -n 1 "$out" | grep -Eq "${final}30\$" || fail "the first run's last line is not 'eval auc=<x> best auc=<b> loss=<y> steps=30'"
tail -n 2 "$out" | head -n 1 | grep -Eq "$best" || fail "no 'best auc=<b> loss=<l>' line before the last"
grep -Eq '^  ps           2 parameter servers in this process, gRPC on 127\.0\.0\.1:[0-9]+, 127\.0\.0\.1:[0-9]+$' "$out" ||
  fail "no line naming the 2 in-process parameter servers"
grep -Eq '^  step 30 +[0-9]+ examples/s  loss [0-9]\.[0-9]{4}  train auc [01]\.[0-9]{4}  ps lookup [0-9]+\.[0-9]{2} ms$' "$out" ||
  fail "no progress line for step 30"
grep -Eq '^throughput   [0-9]+ examples/s: 7680 examples in 30 steps, .* time split: read [0-9]+%, input [0-9]+%, lookup [0-9]+%, layout [0-9]+%, dense [0-9]+%, apply [0-9]+%, other [0-9]+%$' "$out" ||
  fail "no throughput line"
grep -q 'msg="training progress" step=1 loss=' "$err" || fail "no progress line on stderr"
model_dir=$(grep -o -- '--model_dir=[^ ]*' "$out" | head -n 1 | cut -d= -f2-)
[ -n "$model_dir" ] && [ -f "$model_dir/checkpoint" ] || fail "no model dir with a checkpoint state printed"
for f in model.ckpt-30.data model.ckpt-30.index model.ckpt-30.embeddings/slot_1/ps_0_of_2-00000-of-00001 \
  model.ckpt-30.embeddings/slot_4/ps_1_of_2-00000-of-00001; do
  [ -s "$model_dir/$f" ] || fail "the checkpoint lacks $f"
done

if ! timeout 120 "$train" --max_steps=50 --model_dir="$model_dir" >"$out" 2>"$err"; then fail "the second run failed"; fi
tail -n 1 "$out" | grep -Eq "${final}50\$" || fail "the second run's last line is not 'eval auc=<x> best auc=<b> loss=<y> steps=50'"
grep -q "msg=\"restored checkpoint\" checkpoint=$model_dir/model.ckpt-30 global_step=30" "$err" ||
  fail "the second run did not restore model.ckpt-30"
grep -q "msg=\"embedding tables restored\" dir=$model_dir/model.ckpt-30.embeddings entries=[0-9]* dump_num_ps=2 num_ps=2" "$err" ||
  fail "the second run did not restore the tables of model.ckpt-30"

for args in "--no-such-flag" "--train_data=/nonexistent/train-*.tfrecord --eval_data=/nonexistent/eval"; do
  # shellcheck disable=SC2086 # the arguments are split on purpose
  if timeout 60 "$train" $args >"$out" 2>"$err"; then fail "'$args' must fail"; else code=$?; fi
  [ "$code" = 2 ] || fail "'$args': exit status $code, want 2"
  [ "$(grep -c '^train: ' "$err")" = 1 ] || fail "'$args': want one 'train: ...' line on stderr"
done
echo "1 passed, 0 failed"
