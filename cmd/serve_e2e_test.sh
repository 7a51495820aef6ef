#!/usr/bin/env bash
# The README's "Serve" walkthrough, end to end, as a user runs it, on a real ZooKeeper and on
# 127.0.0.1 only: a local ZooKeeper (tools/zk/run.sh); cmd/train as a cluster of processes (2
# cmd/ps parameter servers and a chief, found through ZooKeeper) on a small generated click log;
# cmd/export of its last checkpoint; agentctl decl and pub; two agents (agent v3, --conf,
# --advertise_host=127.0.0.1, model_server as their TF Serving binary): an entry container and a
# PS container serving ps_0 and ps_1; then tfs_client's Predict of a batch through the entry,
# which finds the PS replicas through its agent's HeartBeat, returns the export's scores
# (cmd/predict, the trainer's model over the exported tables) within 1e-6, and tfs_client's
# profile against the entry (random batches of the model's features, --model_spec) has no failed
# request. Then training goes on with parameter sync (issue 25): the parameter servers restart with
# --sync_model_name=ctr, pushing to the replicas the PS container's agent lists, and the chief
# restores the checkpoint and trains on a shifted distribution; while it trains the served scores
# of the batch follow the trainer's (the export's dense part over the training servers' tables,
# cmd/predict --training_ps), and once it has ended and the servers' last pushes (at their stop)
# have completed, equal them within 1e-6. The agents stop cleanly on SIGTERM, and their model
# servers with them. Every wait is bounded, so the test cannot hang.
#
# Usage: serve_e2e_test.sh ZK_RUN_SH TRAIN PS EXPORT AGENTCTL AGENT MODEL_SERVER TFS_CLIENT PREDICT
set -euo pipefail
zk_run=$(realpath "$1") train=$(realpath "$2") ps=$(realpath "$3") export_bin=$(realpath "$4") agentctl=$(realpath "$5")
agent=$(realpath "$6") model_server=$(realpath "$7") tfs_client=$(realpath "$8") predict=$(realpath "$9")
work="$(mktemp -d)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  for f in "$work"/*.log "$work"/*.out; do [ -f "$f" ] && { echo "--- $f"; tail -n 30 "$f"; }; done
  exit 1
}
step() { echo "$(date +%T) $*"; }
free_port() { # a loopback port nothing listens on
  local p
  for _ in $(seq 100); do
    p=$((20000 + RANDOM % 30000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return; fi
  done
  fail "no free port"
}
wait_for() { # wait_for SECONDS FILE PATTERN [PID]: until FILE has a line matching PATTERN
  local i
  for i in $(seq $(($1 * 10))); do
    grep -Eq -- "$3" "$2" 2>/dev/null && return 0
    if [ -n "${4:-}" ] && ! kill -0 "$4" 2>/dev/null; then fail "$2: the process exited before '$3'"; fi
    sleep 0.1
  done
  fail "$2: no '$3' within $1 s"
}
cd "$work"

# 1. A local ZooKeeper.
ZK_PORT=$(free_port)
ZK=127.0.0.1:$ZK_PORT
ZK_PORT=$ZK_PORT ZK_DATA="$work/zk" bash "$zk_run" >zk.log 2>&1 &
pids+=($!)
wait_for 30 zk.log "zk: ready" $!
step "zookeeper ready on $ZK"

# 2. Train: 2 parameter servers and a chief, registered in ZooKeeper as the job e2e, on the demo's
#    generated click log (small: 4000 examples, one epoch), into model/.
Z="--discovery_type=zk --zk_server=$ZK --deep_insight_name=e2e --num_ps=2 --num_workers=1"
# shellcheck disable=SC2086 # $Z is a list of flags
for i in 0 1; do
  "$ps" $Z --index=$i >ps$i.log 2>&1 &
  pids+=($!)
  eval "ps${i}_pid=$!"
  wait_for 30 ps$i.log "^registered ps.$i at 127\.0\.0\.1:" $!
done
# shellcheck disable=SC2086
timeout 120 "$train" $Z --role=chief --model_dir="$work/model" --demo_examples=4000 --epochs=1 --log_step_count_steps=5 \
  >train.out 2>train.log || fail "train"
grep -Eq '^eval auc=0\.[0-9]{4} best auc=0\.[0-9]{4} loss=[0-9.]+ steps=[0-9]+$' train.out || fail "train: no 'eval auc=' line"
grep -q '2 parameter servers from the service discovery: 127.0.0.1:' train.out || fail "train: the parameter servers were not found in ZooKeeper"
steps=$(tail -n 1 train.out | sed 's/.* steps=//')
step "trained $steps steps: $(tail -n 1 train.out)"

# 3. Export the last checkpoint as the model ctr: export/ctr/{entry,ps_0,ps_1}/<global step>/.
"$export_bin" --model_dir="$work/model" --export_base="$work/export/ctr" >export.out 2>export.log || fail "export"
grep -q "as version $steps: entry and 2 PS sub-graphs" export.out || fail "export: not version $steps with 2 PS sub-graphs"
version=$steps

# 4. Declare the export's sub-graphs and publish them into the layout /e2e/layouts/serve.
"$agentctl" --zk_servers=$ZK --bzid=e2e --cmd=decl --export_base="$work/export/ctr" >decl.log 2>&1 || fail "agentctl decl"
"$agentctl" --zk_servers=$ZK --bzid=e2e --cmd=pub --model_name='ctr:*' --layout=serve >pub.log 2>&1 || fail "agentctl pub"

# 5. Two agents v3, each running model_server as its TF Serving: the entry container serves the
#    entry, the PS container ps_0 and ps_1. Each advertises 127.0.0.1, and its model server reaches
#    it through PORT2 (the agent sets it).
ENTRY_GRPC=$(free_port)
for c in entry ps; do
  filter='entry; True'
  [ "$c" = ps ] && filter='ps_{i}; True'
  port=$(free_port)
  printf 'bzid e2e\ndeploy_type unified\nagent_version 3\nzk_servers %s\nlayout_pattern serve\nlayout_filters %s\nagent_port %s\n' \
    "$ZK" "$filter" "$port" >$c.conf
  grpc=$(free_port)
  [ "$c" = entry ] && grpc=$ENTRY_GRPC
  # PORT3 is TF Serving's gRPC port (unified deploy); MY_POD_NAME names the container.
  MY_POD_NAME=e2e-$c PORT3=$grpc "$agent" --conf=$c.conf --tfs_binary="$model_server" --tfs_log="$work/tfs_$c.log" \
    --advertise_host=127.0.0.1 --status_addr=127.0.0.1:$(free_port) >agent_$c.out 2>agent_$c.log &
  pids+=($!)
  eval "agent_${c}_pid=$! agent_${c}_port=$port"
done
# shellcheck disable=SC2154 # set by eval above
wait_for 60 agent_entry.out "^  status endpoint  http://" "$agent_entry_pid"
# shellcheck disable=SC2154
wait_for 60 agent_ps.out "^  status endpoint  http://" "$agent_ps_pid"
entry_status=$(grep -o 'status endpoint  http://[0-9.:]*' agent_entry.out | sed 's|.*http://||')
status=""
for _ in $(seq 600); do
  status=$( (exec 3<>"/dev/tcp/${entry_status%:*}/${entry_status#*:}" && printf 'GET /status HTTP/1.0\r\n\r\n' >&3 && timeout 5 cat <&3) 2>/dev/null || true)
  if grep -q '"ctr:entry"' <<<"$status" && grep -q '"state": "AVAILABLE"' <<<"$status"; then break; fi
  sleep 0.1
done
grep -q '"state": "AVAILABLE"' <<<"$status" || fail "the entry is not AVAILABLE: $status"
step "entry AVAILABLE on 127.0.0.1:$ENTRY_GRPC"

# 6. Predict: a batch of 64 random examples of the model's features (ids of its tables) scored by
#    the export in this process (cmd/predict), and the same batch through the served entry.
"$predict" --export_base="$work/export/ctr" --random=64 --seed=7 --write_input=batch.pbtxt >want.txt 2>predict.log ||
  fail "predict"
got=""
for _ in $(seq 100); do # the entry learns of the PS replicas from its agent's HeartBeat
  if got=$("$tfs_client" --model_name=ctr:entry --target=127.0.0.1:$ENTRY_GRPC --input_type=example_batch --file_type=pbtxt \
    --input_file=batch.pbtxt --timeout=10s --print_outputs 2>tfs_client.log); then break; fi
  sleep 0.2
done
{ grep '^scores ' <<<"$got" || true; } | cut -d' ' -f2 >got.txt
[ "$(wc -l <got.txt)" -eq 64 ] || fail "Predict answered $(wc -l <got.txt) scores, want 64: $got"
paste want.txt got.txt | awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > 1e-6) { bad++; print "example " NR ": export " $1 ", served " $2 } }
  END { exit bad > 0 }' || fail "the served scores differ from the export's by more than 1e-6"
step "Predict: 64 scores equal to the export's within 1e-6 (first: $(head -n 1 got.txt))"
# Every address the entry's agent knows (bindings, service info, ZooKeeper) is on loopback.
status=$( (exec 3<>"/dev/tcp/${entry_status%:*}/${entry_status#*:}" && printf 'GET /status HTTP/1.0\r\n\r\n' >&3 && timeout 5 cat <&3) 2>/dev/null || true)
tr -d ' \n' <<<"$status" | grep -q '"ps_1":\["127\.0\.0\.1:[0-9]*"\]' || fail "the entry's agent does not bind ps_1 on 127.0.0.1: $status"
addrs=$(grep -Eo '[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+:[0-9]+' <<<"$status" | sort -u)
if grep -v '^127\.0\.0\.1:' <<<"$addrs"; then fail "the entry's agent knows addresses off loopback: $addrs"; fi

# 7. Load: tfs_client's profile against the entry, with random batches of the model's features.
"$tfs_client" --cmd_type=profile --model_name=ctr:entry --target=127.0.0.1:$ENTRY_GRPC --input_type=example_batch \
  --model_spec="$work/export/ctr/entry/$version" --batch_size=16 --parallel_num=2 --profile_duration=2 --seed=1 \
  --timeout=10s --profile_json=profile.json >profile.out 2>profile.log || fail "profile"
grep -Eq '^\[Profile\] Count: [1-9][0-9]*, ' profile.out || fail "profile: no [Profile] line"
grep -q '^requests: [0-9]* sent, [0-9]* ok, 0 failed$' profile.out || fail "profile: failed requests"
step "profile: $(grep '^\[Profile\]' profile.out)"

# 8. Training goes on with parameter sync, and the served predictions follow. The parameter servers
#    restart with --sync_model_name=ctr, pushing their updates every second to the ctr:ps_i replicas
#    the PS container's agent lists in its HeartBeat; the chief restores step $version and trains
#    on a shifted distribution (another seed's ground truth). "The trainer's scores" of batch.pbtxt
#    are the export's dense part over the training servers' current tables (cmd/predict
#    --training_ps; the dense part is not synced). While it trains, the served scores must get
#    nearer the trainer's than the export's are (less than half as far); once it has ended and each
#    server's last push (at its stop) has completed, equal them within 1e-6.
stop_ps() { # stop_ps PID NAME: SIGTERM, then exit status 0 within 30 s
  kill -TERM "$1"
  timeout 30 tail --pid="$1" -f /dev/null || fail "$2 still runs 30 s after SIGTERM"
  local code=0
  wait "$1" || code=$?
  [ "$code" -eq 0 ] || fail "$2 exited with $code after SIGTERM"
}
# shellcheck disable=SC2154 # set by eval above
for i in 0 1; do p="ps${i}_pid"; stop_ps "${!p}" "ps $i"; done
training_ps=""
# shellcheck disable=SC2086,SC2154
for i in 0 1; do
  "$ps" $Z --index=$i --sync_model_name=ctr --sync_agent_addr=127.0.0.1:$agent_ps_port --sync_interval=1s \
    --log_level=debug >ps_sync$i.log 2>&1 &
  pids+=($!)
  eval "ps${i}_pid=$!"
  wait_for 30 ps_sync$i.log "^registered ps.$i at 127\.0\.0\.1:" $!
  wait_for 10 ps_sync$i.log "^parameter sync: pushing the updates of ctr:ps_$i every 1s to the replicas the agent at 127\.0\.0\.1:$agent_ps_port lists" $!
  training_ps+="${training_ps:+,}$(grep -o "^registered ps.$i at 127\.0\.0\.1:[0-9]*" ps_sync$i.log | sed 's/.* at //')"
done
sync_steps=2000
# shellcheck disable=SC2086
"$train" $Z --role=chief --model_dir="$work/model" --demo_examples=20000 --demo_seed=99 --epochs=1000 --steps=$sync_steps \
  --log_step_count_steps=50 >train_sync.out 2>train_sync.log &
train_pid=$!
pids+=($train_pid)
trainer_scores() { # the export's dense part over the training servers' tables, to $1
  "$predict" --export_base="$work/export/ctr" --input_file=batch.pbtxt --training_ps="$training_ps" >"$1" 2>>predict_sync.log ||
    fail "predict --training_ps=$training_ps"
}
served_scores() { # the entry's Predict of batch.pbtxt, to $1
  "$tfs_client" --model_name=ctr:entry --target=127.0.0.1:$ENTRY_GRPC --input_type=example_batch --file_type=pbtxt \
    --input_file=batch.pbtxt --timeout=10s --print_outputs 2>>tfs_client.log | { grep '^scores ' || true; } | cut -d' ' -f2 >"$1"
  [ "$(wc -l <"$1")" -eq 64 ] || fail "Predict while training answered $(wc -l <"$1") scores, want 64"
}
gaps() { # gaps TRAINER SERVED: "<mean |served - trainer|> <mean |export - trainer|>"
  paste "$1" "$2" want.txt | awk '{ d = $2 - $1; e = $3 - $1; s += (d < 0 ? -d : d); x += (e < 0 ? -e : e) }
    END { printf "%.6f %.6f\n", s / NR, x / NR }'
}
followed=""
for _ in $(seq 150); do # a round a second, while the chief trains (bounded by its steps, and here)
  sleep 1
  trainer_scores trainer.txt
  served_scores served.txt
  training=""
  kill -0 "$train_pid" 2>/dev/null && ! grep -q '^eval auc=' train_sync.out && training=1
  read -r gap_served gap_export < <(gaps trainer.txt served.txt)
  step "training on: the served scores are $gap_served from the trainer's, the export's $gap_export"
  if [ -n "$training" ] && awk -v s="$gap_served" -v x="$gap_export" 'BEGIN { exit !(x > 1e-3 && s < x / 2) }'; then
    followed=1
  fi
  [ -n "$training" ] || break
done
[ -n "$followed" ] || fail "while training the served scores never came within half the export's distance of the trainer's (each above 1e-3)"
timeout 120 tail --pid="$train_pid" -f /dev/null || fail "the chief still trains 2 minutes after the sync checks"
code=0
wait "$train_pid" || code=$?
[ "$code" -eq 0 ] || fail "train with sync on exited with $code"
grep -q "2 parameter servers from the service discovery: ${training_ps/,/, }$" train_sync.out ||
  fail "train with sync on: the restarted parameter servers ($training_ps) were not found in ZooKeeper"
grep -q "^eval auc=.* steps=$((version + sync_steps))$" train_sync.out || fail "train with sync on: not restored at step $version and trained $sync_steps steps"
step "trained on: $(tail -n 1 train_sync.out)"
# Training has ended: the trainer's final scores, then each server's last push, at its stop.
trainer_scores final.txt
for i in 0 1; do
  p="ps${i}_pid"
  stop_ps "${!p}" "ps $i (sync on)"
  grep -q 'msg="parameter sync stopped"' ps_sync$i.log || fail "ps $i: parameter sync did not stop cleanly"
  grep -Eq "msg=\"parameter sync: pushed\" sub_graph=ctr:ps_$i ids=[1-9]" ps_sync$i.log || fail "ps $i: no push carried ids"
done
served_scores served.txt
paste final.txt served.txt | awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > 1e-6) { bad++; print "example " NR ": trainer " $1 ", served " $2 } }
  END { exit bad > 0 }' || fail "after the last push the served scores differ from the trainer's by more than 1e-6"
read -r _ moved < <(gaps final.txt served.txt)
awk -v x="$moved" 'BEGIN { exit !(x > 1e-3) }' || fail "training on moved the scores by $moved only: the sync checks show nothing"
step "after the last push: 64 served scores equal to the trainer's within 1e-6 (the export's are $moved from them)"

# 9. SIGTERM stops both agents cleanly, and their model servers with them.
for c in entry ps; do
  pid_var="agent_${c}_pid"
  pid=${!pid_var}
  kill -TERM "$pid"
  timeout 30 tail --pid="$pid" -f /dev/null || fail "agent $c still runs 30 s after SIGTERM"
  code=0
  wait "$pid" || code=$?
  [ "$code" -eq 0 ] || fail "agent $c exited with $code after SIGTERM"
done
if (exec 3<>"/dev/tcp/127.0.0.1/$ENTRY_GRPC") 2>/dev/null; then fail "the entry's model server outlived its agent"; fi
echo PASS
