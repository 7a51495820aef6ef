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
# request. The agents stop cleanly on SIGTERM, and their model servers with them. Every wait is
# bounded, so the test cannot hang.
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
  eval "agent_${c}_pid=$!"
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

# 8. HOOK(paramsync): training continues with parameter sync on, and predictions follow (issue 25,
#    "Real-time parameter sync"; not done here). To add: restart the parameter servers with
#    --sync_model_name=ctr --sync_agent_addr=127.0.0.1:<an agent's agent_port> (cmd/ps, whose pushes
#    go to the ctr:ps_i replicas the HeartBeat lists) and a short --sync_interval, run cmd/train
#    again with --model_dir="$work/model" (it restores step $version) on a shifted distribution,
#    and poll the Predict of batch.pbtxt until its scores move toward those of cmd/predict on a
#    fresh export of the new checkpoint, then, after training ends and one push has completed,
#    equal them within 1e-6.

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
